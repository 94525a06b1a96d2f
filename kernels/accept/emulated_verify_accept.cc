#include "kernels/accept/emulated_verify_accept.h"

#include "absl/strings/str_cat.h"
#include "kernels/accept/accept_algorithm.h"
#include "kernels/accept/host_block.h"
#include "kernels/accept/packed_batch.h"
#include "kernels/accept/tree_accept_algorithm.h"

namespace tandem {
namespace accept {

namespace {

LogitsRef Ref(const LogitsView& logits) {
  return LogitsRef{logits.data, logits.rows, logits.vocab, logits.parts};
}

}  // namespace

absl::Status EmulatedVerifyAccept(const LogitsView& logits, absl::Span<const VerifyChain> chains,
                                  std::vector<VerifyOutcome>* outcomes) {
  absl::Status status = ValidateLogitsView(logits);
  if (!status.ok()) return status;
  status = ValidateChainRows(chains, logits.rows);
  if (!status.ok()) return status;
  const PackedBatch batch = PackChains(chains);
  PackedOutputs outputs;
  ResizeOutputs(batch, &outputs);
  std::vector<float> probs(chains.size() * size_t(logits.vocab));
  std::vector<double> weights(probs.size());
  std::vector<double> residual(batch.any_rejection_tree ? probs.size() : 0);
  std::vector<double> node_values(batch.tokens.size());
  BatchView view;
  view.logits = Ref(logits);
  view.chains = batch.chains.data();
  view.num_chains = static_cast<int32_t>(batch.chains.size());
  view.tokens = batch.tokens.data();
  view.q_begin = batch.q_begin.data();
  view.q_ids = batch.q_ids.data();
  view.q_probs = batch.q_probs.data();
  view.parents = batch.parents.data();
  view.probs = probs.data();
  view.weights = weights.data();
  view.residual = residual.empty() ? nullptr : residual.data();
  view.node_values = node_values.data();
  view.out_tokens = outputs.tokens.data();
  view.out_logprobs = outputs.logprobs.data();
  view.out_path = outputs.path.data();
  view.out_status = outputs.status.data();
  HostBlock block;
  for (int c = 0; c < view.num_chains; ++c) AcceptSequence(block, view, c);
  return UnpackOutcomes(batch, outputs, outcomes);
}

absl::Status EmulatedSampleDrafts(const LogitsView& logits, absl::Span<const DraftRow> drafts,
                                  std::vector<DraftProposal>* proposals) {
  absl::Status status = ValidateLogitsView(logits);
  if (!status.ok()) return status;
  status = ValidateDraftRows(drafts, logits.rows);
  if (!status.ok()) return status;
  if (AnyDraftTop(drafts)) {  // As the device backend: top tokens come from the host.
    std::vector<float> row_major;
    if (status = ToRowMajor(logits, &row_major); !status.ok()) return status;
    return HostSampleDrafts(row_major, logits.vocab, drafts, proposals);
  }
  const PackedDrafts packed = PackDrafts(drafts);
  PackedDraftOutputs outputs;
  ResizeDraftOutputs(packed, &outputs);
  std::vector<float> probs(drafts.size() * size_t(logits.vocab));
  std::vector<double> weights(probs.size());
  DraftView view;
  view.logits = Ref(logits);
  view.drafts = packed.rows.data();
  view.num_drafts = static_cast<int32_t>(packed.rows.size());
  view.probs = probs.data();
  view.weights = weights.data();
  view.out_tokens = outputs.tokens.data();
  view.out_q_counts = outputs.q_counts.data();
  view.out_q_ids = outputs.q_ids.data();
  view.out_q_probs = outputs.q_probs.data();
  HostBlock block;
  for (int i = 0; i < view.num_drafts; ++i) SampleDraftRow(block, view, i);
  return UnpackDrafts(packed, outputs, proposals);
}

}  // namespace accept
}  // namespace tandem
