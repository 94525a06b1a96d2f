// A tensor-parallel target group: one process per rank, each holding its weight shard
// and a LlamaModel over a TimedCommunicator.
//
// Protocol. Rank 0 (the leader) alone serves tandem.v1.Worker. For each model call it
// broadcasts the call to the followers as a GroupMessage (group_protocol.h): a fixed
// kGroupChunkBytes first broadcast that holds the whole message in the common case,
// plus a second one only for a larger payload. Then every rank makes the same
// LlamaModel forward (collectives inside); the leader alone consumes its outputs
// (model/forward_consumer.h: acceptance, draft sampling, host logits, a target-side
// proposer), the followers run it with a no-op consumer. Calls without collectives
// (truncate, release, keep-path) are applied on the leader at once and queued
// (worker/target_group_follower.cc runs the followers' side); the queue rides on the next message,
// before its forward, so a verify step costs ONE broadcast plus the model's own collectives. After
// ~1 s without a message the leader sends a heartbeat (the queue, then a Barrier), so followers
// stay in step and a dead rank is noticed while idle. Followers block in the broadcast (no
// spinning) and treat `leader_timeout` without any message as the leader gone.
//
// Failure. When a collective fails on any rank, that rank drops every sequence (its
// KV state is no longer consistent with its peers), discards the communicator and
// re-forms the group through GroupMembership generations; meanwhile the leader answers
// UNAVAILABLE ("target group regrouping: ...") and reports not serving. Once formed
// again it serves with an empty cache (the coordinator re-prefills). Each attempt to
// form is bounded by the regroup timeout, so a restarted rank rejoins within about two
// of them.
#ifndef TANDEM_WORKER_TARGET_GROUP_H_
#define TANDEM_WORKER_TARGET_GROUP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "model/forward_consumer.h"
#include "worker/group_membership.h"
#include "worker/group_protocol.h"
#include "worker/model_executor.h"
#include "worker/model_shard.h"
#include "worker/timed_communicator.h"

namespace tandem {
namespace worker {

struct GroupTimeouts {
  absl::Duration step = absl::Seconds(30);               // Each collective of a step.
  absl::Duration heartbeat_interval = absl::Seconds(1);  // Leader idle -> heartbeat.
  absl::Duration leader_timeout = absl::Seconds(10);     // Follower: silence = leader gone.
};

// How long a shutting-down leader tries to record the shutdown in the store (for
// followers that are regrouping) before it exits anyway.
inline constexpr absl::Duration kShutdownStoreBudget = absl::Seconds(2);

// Called with true when the group forms and false when it breaks (health status).
using ServingListener = std::function<void(bool serving)>;

// The leader (rank 0): a ModelExecutor whose calls run on every rank. Thread-safe.
class TargetGroupLeader final : public ModelExecutor {
 public:
  // `comm` must be the communicator `shard`'s model was built over (rank 0, detached);
  // `membership` is rank 0's. Call Start() to form the group.
  TargetGroupLeader(std::unique_ptr<TimedCommunicator> comm, std::unique_ptr<ModelShard> shard,
                    std::unique_ptr<GroupMembership> membership, const GroupTimeouts& timeouts);
  ~TargetGroupLeader() override;

  // Sets the listener (before Start) and starts the thread that forms the group,
  // re-forms it after failures and sends heartbeats.
  void Start(ServingListener listener);
  // Finishes the call in flight, tells the followers to exit (or, when the group is
  // not formed, records the shutdown in the store for the followers of the last formed
  // generation, trying for at most kShutdownStoreBudget) and stops the thread, giving
  // up a forming attempt in flight. Bounded even when every peer and the store are gone.
  // Idempotent.
  void Shutdown();

  // The followers get the same forward command and consume nothing; the leader alone
  // hands the outputs to `consumer`. Inputs of the consumer that do not fit the batch's
  // logit rows (ForwardConsumer::CheckRows) are rejected before anything is sent.
  absl::Status Forward(const std::vector<SequenceInput>& batch, ForwardConsumer& consumer) override;
  absl::Status Truncate(uint64_t seq_id, int length) override;
  absl::Status Release(uint64_t seq_id) override;
  absl::Status KeepPath(uint64_t seq_id, int start_position,
                        const std::vector<int32_t>& accepted_rows) override;
  absl::StatusOr<int> CachedLength(uint64_t seq_id) const override;
  KvCacheStats kv_stats() const override;
  absl::Status Available() const override;
  ExecutorTimes times() const override;
  const LlamaConfig& config() const override { return shard_->model().config(); }
  int max_batch_tokens() const override { return shard_->model().max_batch_tokens(); }
  int tp_size() const override { return comm_->size(); }
  std::string collective_backend() const override { return comm_->backend(); }

  // Generation of the formed group; 0 while none is formed.
  uint64_t generation() const;

 private:
  enum class State { kForming, kFormed, kStopped };

  void Run();
  void FormOnce();
  absl::Status Send(GroupMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Break(const absl::Status& cause) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(bool serving);
  // Broadcasts a forward of `batch` to the followers and runs `local` (the leader's
  // forward of it); breaks the group when a collective fails.
  template <typename Fn>
  absl::Status ForwardOnAllRanks(const std::vector<SequenceInput>& batch, Fn&& local);
  template <typename Fn>
  absl::Status ApplyAndQueue(GroupCommand command, Fn&& local);

  std::unique_ptr<TimedCommunicator> comm_;  // Declared before shard_: outlives the model.
  std::unique_ptr<ModelShard> shard_;
  std::unique_ptr<GroupMembership> membership_;
  const GroupTimeouts timeouts_;
  ServingListener listener_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kForming;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_formed_ ABSL_GUARDED_BY(mu_) = 0;
  std::string unavailable_reason_ ABSL_GUARDED_BY(mu_) = "target group forming";
  std::vector<GroupCommand> pending_ ABSL_GUARDED_BY(mu_);  // For the followers.
  absl::Time last_send_ ABSL_GUARDED_BY(mu_);
  double forward_ms_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::string send_buffer_;
  std::thread thread_;
};

// A follower (rank > 0): joins the group, executes the leader's messages and re-forms
// after failures. Runs until the leader sends shutdown (returns OK), the leader's last
// formed generation is marked shut down while regrouping (OK), or `stop()` returns
// true (CANCELLED). `comm` is the communicator the shard's model was built over.
absl::Status RunFollower(TimedCommunicator& comm, ModelShard& shard, GroupMembership& membership,
                         const GroupTimeouts& timeouts, const std::function<bool()>& stop,
                         const ServingListener& listener);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_TARGET_GROUP_H_
