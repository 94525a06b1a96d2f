// The followers' side of a target group (worker/target_group.h): receive the
// leader's messages and execute them on this rank's shard.
#include <glog/logging.h>

#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "worker/target_group.h"

namespace tandem {
namespace worker {

namespace {

// Receives and executes the leader's messages for one generation. OK when the leader
// says shutdown; the failure otherwise.
absl::Status ServeGeneration(TimedCommunicator& comm, ModelShard& shard, uint64_t generation,
                             const GroupTimeouts& timeouts, const std::function<bool()>& stop) {
  std::string chunk(kGroupChunkBytes, '\0');
  std::string whole;
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
      status = shard.Execute(command);
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
