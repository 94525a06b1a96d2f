#include "model/output_consumers.h"

namespace tandem {

absl::Status NoOpConsumer::Consume(Backend& backend, const ForwardOutputs&) {
  return backend.Synchronize();
}

absl::Status HostLogitsConsumer::CheckRows(int) const {
  if (logits_ == nullptr) return absl::InvalidArgumentError("Forward: logits is null");
  return absl::OkStatus();
}

absl::Status HostLogitsConsumer::Consume(Backend& backend, const ForwardOutputs& outputs) {
  return backend.CopyLogitsToHost(outputs.logits, logits_, &staging_);
}

absl::Status VerifyAcceptConsumer::CheckRows(int logit_rows) const {
  if (outcomes_ == nullptr) return absl::InvalidArgumentError("Forward: outcomes is null");
  return ValidateChainRows(chains_, logit_rows);
}

absl::Status VerifyAcceptConsumer::Consume(Backend& backend, const ForwardOutputs& outputs) {
  return backend.VerifyAccept(outputs.logits, chains_, outcomes_);
}

absl::Status DraftSampleConsumer::CheckRows(int logit_rows) const {
  if (proposals_ == nullptr) {
    return absl::InvalidArgumentError("Forward: proposals is null");
  }
  return ValidateDraftRows(drafts_, logit_rows);
}

absl::Status DraftSampleConsumer::Consume(Backend& backend, const ForwardOutputs& outputs) {
  return backend.SampleDrafts(outputs.logits, drafts_, proposals_);
}

}  // namespace tandem
