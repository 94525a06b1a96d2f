// One rank's LlamaModel plus the bookkeeping every rank of a group needs: which
// sequences exist (so all of them can be dropped when the group fails) and a single
// entry point that executes a broadcast GroupCommand. The leader runs its own calls
// through the same code as the followers, so all ranks stay in step by construction.
//
// Not thread-safe: the owner serializes calls.
#ifndef TANDEM_WORKER_MODEL_SHARD_H_
#define TANDEM_WORKER_MODEL_SHARD_H_

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "model/forward_consumer.h"
#include "model/llama.h"
#include "worker/group_protocol.h"

namespace tandem {
namespace worker {

class ModelShard {
 public:
  explicit ModelShard(std::unique_ptr<LlamaModel> model);

  // LlamaModel calls (same contracts), tracking the sequences that exist.
  absl::Status Forward(const std::vector<SequenceInput>& batch, ForwardConsumer& consumer);
  absl::Status Truncate(uint64_t seq_id, int length);
  absl::Status Release(uint64_t seq_id);
  absl::Status KeepPath(uint64_t seq_id, int start_position, const std::vector<int32_t>& rows);

  // Runs `command` with the call above that matches its kind; a forward command's
  // outputs go to a NoOpConsumer (a follower consumes nothing).
  absl::Status Execute(const GroupCommand& command);

  // Releases every sequence (the KV state is invalid after a failed collective).
  // Returns how many there were.
  int DropAll();

  LlamaModel& model() { return *model_; }
  const LlamaModel& model() const { return *model_; }

 private:
  std::unique_ptr<LlamaModel> model_;
  std::unordered_set<uint64_t> live_;  // Superset of the sequences in the cache.
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_MODEL_SHARD_H_
