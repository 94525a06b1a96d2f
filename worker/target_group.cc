#include "worker/target_group.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace tandem {
namespace worker {

TargetGroupLeader::TargetGroupLeader(std::unique_ptr<TimedCommunicator> comm,
                                     std::unique_ptr<ModelShard> shard,
                                     std::unique_ptr<GroupMembership> membership,
                                     const GroupTimeouts& timeouts)
    : comm_(std::move(comm)),
      shard_(std::move(shard)),
      membership_(std::move(membership)),
      timeouts_(timeouts) {}

TargetGroupLeader::~TargetGroupLeader() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    wake_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void TargetGroupLeader::Start(ServingListener listener) {
  listener_ = std::move(listener);
  thread_ = std::thread([this] { Run(); });
}

void TargetGroupLeader::Notify(bool serving) {
  if (listener_) listener_(serving);
}

void TargetGroupLeader::Run() {
  while (true) {
    State state;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      state = state_;
    }
    if (state == State::kForming) {
      FormOnce();
      continue;
    }
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    if (state_ == State::kFormed && absl::Now() - last_send_ >= timeouts_.heartbeat_interval) {
      GroupMessage message;
      message.op = GroupOp::kHeartbeat;
      message.generation = generation_;
      message.commands = std::move(pending_);
      pending_.clear();
      absl::Status status = Send(std::move(message));
      if (status.ok()) status = comm_->Barrier(timeouts_.step);
      if (!status.ok()) {
        LOG(WARNING) << "target group: heartbeat failed: " << status;
        Break(status);
        continue;
      }
    }
    wake_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
  }
}

void TargetGroupLeader::FormOnce() {
  absl::StatusOr<uint64_t> generation = membership_->BeginNextGeneration();
  if (!generation.ok()) {
    LOG(WARNING) << "target group: cannot start a generation: " << generation.status();
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    unavailable_reason_ =
        absl::StrCat("target group regrouping: rendezvous store: ", generation.status().message());
    wake_.WaitWithTimeout(&mu_, absl::Seconds(1));
    return;
  }
  LOG(INFO) << "target group: forming generation " << *generation << " of " << membership_->size()
            << " ranks";
  absl::StatusOr<std::unique_ptr<Communicator>> comm = membership_->Connect(*generation);
  absl::Status status = comm.status();
  if (status.ok()) status = (*comm)->Barrier(timeouts_.step);
  if (!status.ok()) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;  // Shutdown() cancelled the attempt.
    }
    std::vector<int> missing = membership_->MissingRanks(*generation);
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    unavailable_reason_ =
        missing.empty()
            ? absl::StrCat("target group regrouping: generation ", *generation,
                           " did not form: ", status.message())
            : absl::StrCat("target group regrouping: rank ", absl::StrJoin(missing, ", rank "),
                           " lost (absent from generation ", *generation, ")");
    LOG(WARNING) << unavailable_reason_;
    wake_.WaitWithTimeout(&mu_, absl::Milliseconds(200));
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    comm_->Reset(*std::move(comm));
    state_ = State::kFormed;
    generation_ = *generation;
    last_formed_ = *generation;
    pending_.clear();
    last_send_ = absl::Now();
  }
  if (absl::Status marked = membership_->MarkFormed(*generation); !marked.ok()) {
    LOG(WARNING) << "target group: cannot record generation " << *generation
                 << " as formed: " << marked;
  }
  LOG(INFO) << "target group: generation " << *generation << " formed";
  Notify(true);
}

absl::Status TargetGroupLeader::Send(GroupMessage message) {
  const std::string bytes = EncodeGroupMessage(message);
  send_buffer_.assign(kGroupChunkBytes, '\0');
  std::memcpy(&send_buffer_[0], bytes.data(), std::min(bytes.size(), kGroupChunkBytes));
  last_send_ = absl::Now();
  absl::Status status = comm_->Broadcast(&send_buffer_[0], kGroupChunkBytes, 0, timeouts_.step);
  if (status.ok() && bytes.size() > kGroupChunkBytes) {
    std::string rest = bytes.substr(kGroupChunkBytes);
    status = comm_->Broadcast(&rest[0], rest.size(), 0, timeouts_.step);
  }
  return status;
}

void TargetGroupLeader::Break(const absl::Status& cause) {
  const int dropped = shard_->DropAll();
  comm_->Reset(nullptr);
  state_ = State::kForming;
  generation_ = 0;
  pending_.clear();
  unavailable_reason_ =
      absl::StrCat("target group regrouping: a collective failed: ", cause.message());
  LOG(WARNING) << unavailable_reason_ << " (dropped " << dropped << " sequences)";
  Notify(false);
  wake_.SignalAll();
}

template <typename Fn>
absl::Status TargetGroupLeader::ForwardOnAllRanks(const std::vector<SequenceInput>& batch,
                                                  Fn&& local) {
  absl::MutexLock lock(&mu_);
  if (state_ != State::kFormed) return absl::UnavailableError(unavailable_reason_);
  const absl::Time start = absl::Now();
  GroupMessage message;
  message.op = GroupOp::kStep;
  message.generation = generation_;
  message.commands = std::move(pending_);
  pending_.clear();
  message.commands.push_back(GroupCommand::Forward(batch));
  absl::Status status = Send(std::move(message));
  if (status.ok()) {
    const int64_t calls = comm_->calls();
    status = local();
    if (!status.ok() && comm_->calls() == calls) {
      // Rejected before any collective, identically on every rank: the group is fine.
      forward_ms_ += absl::ToDoubleMilliseconds(absl::Now() - start);
      return status;
    }
    // A failure once collectives ran (in one, or after them on this rank only, e.g. the
    // logits copy or the acceptance on the device) leaves the ranks' caches out of step:
    // the group breaks and is re-formed.
  }
  forward_ms_ += absl::ToDoubleMilliseconds(absl::Now() - start);
  if (!status.ok()) {
    Break(status);
    return absl::UnavailableError(unavailable_reason_);
  }
  return absl::OkStatus();
}

absl::Status TargetGroupLeader::Forward(const std::vector<SequenceInput>& batch,
                                        ForwardConsumer& consumer) {
  // The followers never see the consumer: a rejection of its inputs after the
  // broadcast would leave the followers in collectives the leader does not join.
  absl::Status status = consumer.CheckRows(CountLogitRows(batch));
  if (!status.ok()) return status;
  return ForwardOnAllRanks(batch, [&] { return shard_->Forward(batch, consumer); });
}

template <typename Fn>
absl::Status TargetGroupLeader::ApplyAndQueue(GroupCommand command, Fn&& local) {
  absl::MutexLock lock(&mu_);
  absl::Status status = local();
  if (status.ok() && state_ == State::kFormed) pending_.push_back(std::move(command));
  return status;
}

absl::Status TargetGroupLeader::Truncate(uint64_t seq_id, int length) {
  return ApplyAndQueue(GroupCommand::Truncate(seq_id, length),
                       [&] { return shard_->Truncate(seq_id, length); });
}

absl::Status TargetGroupLeader::Release(uint64_t seq_id) {
  return ApplyAndQueue(GroupCommand::Release(seq_id), [&] { return shard_->Release(seq_id); });
}

absl::Status TargetGroupLeader::KeepPath(uint64_t seq_id, int start_position,
                                         const std::vector<int32_t>& accepted_rows) {
  return ApplyAndQueue(GroupCommand::KeepPath(seq_id, start_position, accepted_rows),
                       [&] { return shard_->KeepPath(seq_id, start_position, accepted_rows); });
}

absl::StatusOr<int> TargetGroupLeader::CachedLength(uint64_t seq_id) const {
  absl::MutexLock lock(&mu_);
  return shard_->model().CachedLength(seq_id);
}

KvCacheStats TargetGroupLeader::kv_stats() const {
  absl::MutexLock lock(&mu_);
  return shard_->model().kv_stats();
}

absl::Status TargetGroupLeader::Available() const {
  absl::MutexLock lock(&mu_);
  if (state_ == State::kFormed) return absl::OkStatus();
  return absl::UnavailableError(unavailable_reason_);
}

ExecutorTimes TargetGroupLeader::times() const {
  absl::MutexLock lock(&mu_);
  ExecutorTimes times;
  times.forward_ms = forward_ms_;
  times.collective_ms = comm_->collective_ns() / 1e6;
  return times;
}

uint64_t TargetGroupLeader::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

void TargetGroupLeader::Shutdown() {
  uint64_t last = 0;
  bool told_followers = false;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
    last = last_formed_;
    if (state_ == State::kFormed) {
      GroupMessage message;
      message.op = GroupOp::kShutdown;
      message.generation = generation_;
      message.commands = std::move(pending_);
      pending_.clear();
      absl::Status status = Send(std::move(message));
      told_followers = status.ok();
      if (!status.ok()) LOG(WARNING) << "target group: shutdown message failed: " << status;
    }
    state_ = State::kStopped;
    unavailable_reason_ = "target group shut down";
    wake_.SignalAll();
  }
  // The thread may be forming a generation: waiting (up to the regroup timeout) for
  // ranks that are gone, or for a store that is gone (the coordinator, when every
  // process is stopped at once). Nothing in flight there is worth finishing: give up.
  membership_->SetGiveUpTime(absl::Now());
  if (thread_.joinable()) thread_.join();
  // Followers that missed the message (regrouping) learn it from the store, if it can
  // be reached soon. Skipped when they all got it: the store (the coordinator) may
  // already be gone, and waiting for it would only delay the exit.
  if (last > 0 && !told_followers) {
    membership_->SetGiveUpTime(absl::Now() + kShutdownStoreBudget);
    if (absl::Status marked = membership_->MarkShutdown(last); !marked.ok()) {
      LOG(WARNING) << "target group: cannot record the shutdown of generation " << last << ": "
                   << marked;
    }
  }
  Notify(false);
}

}  // namespace worker
}  // namespace tandem
