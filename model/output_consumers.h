// The ForwardConsumers of the runtime's forward passes (model/forward_consumer.h).
// Each keeps pointers to its inputs and outputs: they must outlive the forward call.
#ifndef TANDEM_MODEL_OUTPUT_CONSUMERS_H_
#define TANDEM_MODEL_OUTPUT_CONSUMERS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/accept/draft_sample.h"
#include "kernels/accept/verify_accept.h"
#include "kernels/backend.h"
#include "model/forward_consumer.h"
#include "model/llama.h"

namespace tandem {

// Consumes nothing (a follower rank's share of a group forward); synchronizes.
class NoOpConsumer final : public ForwardConsumer {
 public:
  absl::Status CheckRows(int) const override { return absl::OkStatus(); }
  absl::Status Consume(Backend& backend, const ForwardOutputs&) override;
};

// Copies the logit rows to the host: *logits is replaced by [rows, vocab] float32,
// row-major, full vocabulary (capacity reused; Backend::CopyLogitsToHost).
class HostLogitsConsumer final : public ForwardConsumer {
 public:
  explicit HostLogitsConsumer(std::vector<float>* logits) : logits_(logits) {}
  // INVALID_ARGUMENT when logits is null.
  absl::Status CheckRows(int logit_rows) const override;
  absl::Status Consume(Backend& backend, const ForwardOutputs& outputs) override;

 private:
  std::vector<float>* logits_;
  std::vector<float> staging_;  // Rank-major rows on their way to row-major.
};

// Runs the acceptance of `chains` over the logit rows (Backend::VerifyAccept):
// *outcomes receives one outcome per chain, in order; only those reach the host.
class VerifyAcceptConsumer final : public ForwardConsumer {
 public:
  VerifyAcceptConsumer(absl::Span<const VerifyChain> chains, std::vector<VerifyOutcome>* outcomes)
      : chains_(chains), outcomes_(outcomes) {}
  // INVALID_ARGUMENT when outcomes is null or a chain does not fit (ValidateChainRows).
  absl::Status CheckRows(int logit_rows) const override;
  absl::Status Consume(Backend& backend, const ForwardOutputs& outputs) override;

 private:
  absl::Span<const VerifyChain> chains_;
  std::vector<VerifyOutcome>* outcomes_;
};

// Samples one draft proposal per draft row from the logit rows
// (Backend::SampleDrafts): *proposals receives them in order; only those reach the host.
class DraftSampleConsumer final : public ForwardConsumer {
 public:
  DraftSampleConsumer(absl::Span<const DraftRow> drafts, std::vector<DraftProposal>* proposals)
      : drafts_(drafts), proposals_(proposals) {}
  // INVALID_ARGUMENT when proposals is null or a row does not fit (ValidateDraftRows).
  absl::Status CheckRows(int logit_rows) const override;
  absl::Status Consume(Backend& backend, const ForwardOutputs& outputs) override;

 private:
  absl::Span<const DraftRow> drafts_;
  std::vector<DraftProposal>* proposals_;
};

// target.Forward(batch, consumer) with a HostLogitsConsumer into *logits: the forward
// of a LlamaModel or a worker ModelExecutor with its logits on the host.
template <typename Target>
absl::Status ForwardToHost(Target& target, const std::vector<SequenceInput>& batch,
                           std::vector<float>* logits) {
  HostLogitsConsumer consumer(logits);
  return target.Forward(batch, consumer);
}

}  // namespace tandem

#endif  // TANDEM_MODEL_OUTPUT_CONSUMERS_H_
