// The model as the draft and target engines see it: LlamaModel's calls, run either on
// a single process (LocalExecutor) or on every rank of a tensor-parallel group (the
// group leader, see target_group.h). Engines never know which.
#ifndef TANDEM_WORKER_MODEL_EXECUTOR_H_
#define TANDEM_WORKER_MODEL_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/forward_consumer.h"
#include "model/llama.h"

namespace tandem {
namespace worker {

// Cumulative time counters of an executor, milliseconds since it started.
struct ExecutorTimes {
  double forward_ms = 0;     // Wall time in Forward calls (collectives included).
  double collective_ms = 0;  // Wall time in collectives (broadcasts and the model's).
};

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;

  // Same contracts as LlamaModel (model/llama.h). A group executor also fails with
  // UNAVAILABLE while the group is not formed or when a collective fails (then every
  // sequence is dropped: the coordinator re-prefills). Forward hands the outputs to
  // `consumer` (model/forward_consumer.h) where they are computed (on a group, the
  // leader's rank; the other ranks consume nothing).
  virtual absl::Status Forward(const std::vector<SequenceInput>& batch,
                               ForwardConsumer& consumer) = 0;
  virtual absl::Status Truncate(uint64_t seq_id, int length) = 0;
  virtual absl::Status Release(uint64_t seq_id) = 0;
  virtual absl::Status KeepPath(uint64_t seq_id, int start_position,
                                const std::vector<int32_t>& accepted_rows) = 0;
  virtual absl::StatusOr<int> CachedLength(uint64_t seq_id) const = 0;
  virtual KvCacheStats kv_stats() const = 0;
  // LlamaModel::Fork (a branch sharing a prefix of the parent's KV). Only executors
  // that serve drafts branch; the others (a tensor-parallel group, whose ranks would
  // have to fork together) answer UNIMPLEMENTED.
  virtual absl::Status Fork(uint64_t parent, uint64_t child, int length) {
    return absl::UnimplementedError("this executor does not branch sequences");
  }

  // OK when steps can run; UNAVAILABLE with the reason otherwise.
  virtual absl::Status Available() const = 0;

  virtual ExecutorTimes times() const = 0;
  virtual const LlamaConfig& config() const = 0;
  virtual int max_batch_tokens() const = 0;
  virtual int tp_size() const = 0;
  // "local", "gloo" or "nccl".
  virtual std::string collective_backend() const = 0;
};

// Executor over one process's LlamaModel (draft, or a target with tp = 1).
// Not thread-safe: the owner serializes calls.
class LocalExecutor final : public ModelExecutor {
 public:
  explicit LocalExecutor(std::unique_ptr<LlamaModel> model);

  absl::Status Forward(const std::vector<SequenceInput>& batch, ForwardConsumer& consumer) override;
  absl::Status Truncate(uint64_t seq_id, int length) override;
  absl::Status Release(uint64_t seq_id) override;
  absl::Status KeepPath(uint64_t seq_id, int start_position,
                        const std::vector<int32_t>& accepted_rows) override;
  absl::StatusOr<int> CachedLength(uint64_t seq_id) const override;
  KvCacheStats kv_stats() const override;
  absl::Status Fork(uint64_t parent, uint64_t child, int length) override;
  absl::Status Available() const override { return absl::OkStatus(); }
  ExecutorTimes times() const override { return times_; }
  const LlamaConfig& config() const override { return model_->config(); }
  int max_batch_tokens() const override { return model_->max_batch_tokens(); }
  int tp_size() const override { return 1; }
  std::string collective_backend() const override { return "local"; }

 private:
  std::unique_ptr<LlamaModel> model_;
  ExecutorTimes times_;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_MODEL_EXECUTOR_H_
