#include "worker/model_executor.h"

#include <utility>

#include "absl/time/clock.h"

namespace tandem {
namespace worker {

LocalExecutor::LocalExecutor(std::unique_ptr<LlamaModel> model) : model_(std::move(model)) {}

absl::Status LocalExecutor::Forward(const std::vector<SequenceInput>& batch,
                                    ForwardConsumer& consumer) {
  const absl::Time start = absl::Now();
  absl::Status status = model_->Forward(batch, consumer);
  times_.forward_ms += absl::ToDoubleMilliseconds(absl::Now() - start);
  return status;
}

absl::Status LocalExecutor::Truncate(uint64_t seq_id, int length) {
  return model_->Truncate(seq_id, length);
}

absl::Status LocalExecutor::Release(uint64_t seq_id) { return model_->Release(seq_id); }

absl::Status LocalExecutor::Fork(uint64_t parent, uint64_t child, int length) {
  return model_->Fork(parent, child, length);
}

absl::Status LocalExecutor::KeepPath(uint64_t seq_id, int start_position,
                                     const std::vector<int32_t>& accepted_rows) {
  return model_->KeepPath(seq_id, start_position, accepted_rows);
}

absl::StatusOr<int> LocalExecutor::CachedLength(uint64_t seq_id) const {
  return model_->CachedLength(seq_id);
}

KvCacheStats LocalExecutor::kv_stats() const { return model_->kv_stats(); }

}  // namespace worker
}  // namespace tandem
