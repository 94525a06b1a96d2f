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
                                        std::vector<float>* logits) {
  return ForwardOnAllRanks(batch, [&] { return shard_->Forward(batch, logits); });
}

absl::Status TargetGroupLeader::ForwardAccept(const std::vector<SequenceInput>& batch,
                                              absl::Span<const VerifyChain> chains,
                                              std::vector<VerifyOutcome>* outcomes) {
  // The followers never see the chains: a rejection of them after the broadcast would
  // leave the followers in collectives the leader does not join.
  if (outcomes == nullptr) return absl::InvalidArgumentError("ForwardAccept: outcomes is null");
  absl::Status status = ValidateChainRows(chains, CountLogitRows(batch));
  if (!status.ok()) return status;
  return ForwardOnAllRanks(batch, [&] { return shard_->ForwardAccept(batch, chains, outcomes); });
}

absl::Status TargetGroupLeader::ForwardSampleDrafts(const std::vector<SequenceInput>& batch,
                                                    absl::Span<const DraftRow> drafts,
                                                    std::vector<DraftProposal>* proposals) {
  // As for ForwardAccept: the followers never see the draft rows.
  if (proposals == nullptr) {
    return absl::InvalidArgumentError("ForwardSampleDrafts: proposals is null");
  }
  absl::Status status = ValidateDraftRows(drafts, CountLogitRows(batch));
  if (!status.ok()) return status;
  return ForwardOnAllRanks(batch,
                           [&] { return shard_->ForwardSampleDrafts(batch, drafts, proposals); });
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

// ---------------------------------------------------------------------------------
// Followers.

namespace {

// Receives and executes the leader's messages for one generation. OK when the leader
// says shutdown; the failure otherwise.
absl::Status ServeGeneration(TimedCommunicator& comm, ModelShard& shard, uint64_t generation,
                             const GroupTimeouts& timeouts, const std::function<bool()>& stop) {
  std::string chunk(kGroupChunkBytes, '\0');
  std::string whole;
  std::vector<float> logits;
  while (!stop()) {
    absl::Status status = comm.Broadcast(&chunk[0], kGroupChunkBytes, 0, timeouts.leader_timeout);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("waiting for the leader: ", status.message()));
    }
    absl::StatusOr<size_t> size = DecodeGroupMessageSize(chunk.data(), chunk.size());
    if (!size.ok()) return size.status();
    const char* bytes = chunk.data();
    if (*size > kGroupChunkBytes) {
      whole.resize(*size);
      std::memcpy(&whole[0], chunk.data(), kGroupChunkBytes);
      status = comm.Broadcast(&whole[kGroupChunkBytes], *size - kGroupChunkBytes, 0, timeouts.step);
      if (!status.ok()) return status;
      bytes = whole.data();
    }
    absl::StatusOr<GroupMessage> message = DecodeGroupMessage(bytes, *size);
    if (!message.ok()) return message.status();
    if (message->generation != generation) {
      return absl::DataLossError(absl::StrCat("message of generation ", message->generation,
                                              " in generation ", generation));
    }
    for (const GroupCommand& command : message->commands) {
      const int64_t calls = comm.calls();
      status = shard.Execute(command, &logits);
      if (!status.ok()) {
        // Once collectives ran this rank's cache may differ from the others': leave.
        if (comm.calls() != calls) return status;
        // Rejected before any collective; the leader got the same answer.
        VLOG(1) << "target group follower: command rejected: " << status;
      }
    }
    switch (message->op) {
      case GroupOp::kHeartbeat:
        status = comm.Barrier(timeouts.step);
        if (!status.ok()) return status;
        break;
      case GroupOp::kShutdown:
        return absl::OkStatus();
      case GroupOp::kStep:
        break;
    }
  }
  return absl::CancelledError("follower stopped");
}

}  // namespace

absl::Status RunFollower(TimedCommunicator& comm, ModelShard& shard, GroupMembership& membership,
                         const GroupTimeouts& timeouts, const std::function<bool()>& stop,
                         const ServingListener& listener) {
  std::optional<uint64_t> wait_after;
  std::optional<uint64_t> last_formed;
  const auto give_up = [&] {
    if (stop()) return true;
    if (!last_formed.has_value()) return false;
    std::optional<uint64_t> shut = membership.ShutdownGeneration();
    return shut.has_value() && *shut >= *last_formed;
  };
  bool first = true;
  while (true) {
    absl::StatusOr<uint64_t> generation = membership.WaitForGenerationAfter(wait_after, give_up);
    if (!generation.ok()) {
      if (stop()) return generation.status();
      LOG(INFO) << "target group follower: the leader shut down generation " << *last_formed;
      return absl::OkStatus();
    }
    if (first) {
      first = false;
      if (membership.IsFormed(*generation)) {
        // The group formed without this rank (it restarted): wait for the next one.
        wait_after = *generation;
        continue;
      }
    }
    LOG(INFO) << "target group follower rank " << membership.rank() << ": joining generation "
              << *generation;
    absl::StatusOr<std::unique_ptr<Communicator>> joined = membership.Connect(*generation);
    absl::Status status = joined.status();
    if (status.ok()) status = (*joined)->Barrier(timeouts.step);
    if (!status.ok()) {
      LOG(WARNING) << "target group follower: generation " << *generation
                   << " did not form: " << status;
      wait_after = *generation;
      continue;
    }
    comm.Reset(*std::move(joined));
    last_formed = *generation;
    if (listener) listener(true);
    status = ServeGeneration(comm, shard, *generation, timeouts, stop);
    const int dropped = shard.DropAll();
    comm.Reset(nullptr);
    if (listener) listener(false);
    if (status.ok()) {
      LOG(INFO) << "target group follower: shutdown from the leader";
      return absl::OkStatus();
    }
    if (stop()) return absl::CancelledError("follower stopped");
    LOG(WARNING) << "target group follower: generation " << *generation << " broke (" << status
                 << "); dropped " << dropped << " sequences, regrouping";
    wait_after = *generation;
  }
}

}  // namespace worker
}  // namespace tandem
