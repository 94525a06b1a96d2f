#include "worker/model_executor.h"

#include <utility>

#include "absl/time/clock.h"

namespace tandem {
namespace worker {

LocalExecutor::LocalExecutor(std::unique_ptr<LlamaModel> model) : model_(std::move(model)) {}

template <typename Fn>
absl::Status LocalExecutor::Timed(Fn&& forward) {
  const absl::Time start = absl::Now();
  absl::Status status = forward();
  times_.forward_ms += absl::ToDoubleMilliseconds(absl::Now() - start);
  return status;
}

absl::Status LocalExecutor::Forward(const std::vector<SequenceInput>& batch,
                                    std::vector<float>* logits) {
  return Timed([&] { return model_->Forward(batch, logits); });
}

absl::Status LocalExecutor::ForwardAccept(const std::vector<SequenceInput>& batch,
                                          absl::Span<const VerifyChain> chains,
                                          std::vector<VerifyOutcome>* outcomes) {
  return Timed([&] { return model_->ForwardAccept(batch, chains, outcomes); });
}

absl::Status LocalExecutor::ForwardSampleDrafts(const std::vector<SequenceInput>& batch,
                                                absl::Span<const DraftRow> drafts,
                                                std::vector<DraftProposal>* proposals) {
  return Timed([&] { return model_->ForwardSampleDrafts(batch, drafts, proposals); });
}

absl::Status LocalExecutor::Truncate(uint64_t seq_id, int length) {
  return model_->Truncate(seq_id, length);
}

absl::Status LocalExecutor::Release(uint64_t seq_id) { return model_->Release(seq_id); }

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
