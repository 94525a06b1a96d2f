// Verified chains (verify_accept.h) and draft rows (draft_sample.h) packed into flat
// plain-old-data arrays: the form the block-parallel algorithms (accept_algorithm.h)
// read, uploaded as is to a GPU, and the flat outputs they write. Host code.
#ifndef TANDEM_KERNELS_ACCEPT_PACKED_BATCH_H_
#define TANDEM_KERNELS_ACCEPT_PACKED_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/accept/draft_sample.h"
#include "kernels/accept/packed_types.h"
#include "kernels/accept/verify_accept.h"

namespace tandem {
namespace accept {

// Host arrays of a packed batch. q entries of proposal j (global index) are
// [q_begin[j], q_begin[j + 1]) in q_ids / q_probs.
struct PackedBatch {
  std::vector<PackedChain> chains;
  std::vector<int32_t> tokens;   // Every proposal, chain after chain.
  std::vector<int32_t> q_begin;  // tokens.size() + 1 entries.
  std::vector<int32_t> q_ids;
  std::vector<float> q_probs;
  std::vector<int32_t> parents;     // One per proposal: a tree's, or i - 1 along a chain.
  int32_t num_outputs = 0;          // Sum of K + 1 over the chains.
  bool any_rejection_tree = false;  // Whether BatchView::residual is needed.
};

// Flat outputs: tokens, logprobs and path hold num_outputs slots (chain c at
// output_begin).
struct PackedOutputs {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<int32_t> path;         // Trees' accepted nodes (chains' are implied).
  std::vector<PackedStatus> status;  // One per chain.
};

// Packs `chains` (expected valid, see VerifyChain). Never fails; q is copied for every
// rule (cheap) so the packing does not depend on the rule.
PackedBatch PackChains(absl::Span<const VerifyChain> chains);

// Sizes `outputs` for `batch`.
void ResizeOutputs(const PackedBatch& batch, PackedOutputs* outputs);

// The outcomes the outputs describe (same message as spec::AcceptProposals or
// spec::AcceptTree for a distribution without mass). INTERNAL when a status is inconsistent (e.g.
// counts out of range: a kernel bug, never silently accepted).
absl::Status UnpackOutcomes(const PackedBatch& batch, const PackedOutputs& outputs,
                            std::vector<VerifyOutcome>* outcomes);

// Host arrays of packed draft rows; num_q_slots = sum of q_size.
struct PackedDrafts {
  std::vector<PackedDraftRow> rows;
  int32_t num_q_slots = 0;
};

// Flat draft outputs (DraftView's out_* arrays).
struct PackedDraftOutputs {
  std::vector<int32_t> tokens;    // One per row.
  std::vector<int32_t> q_counts;  // One per row.
  std::vector<int32_t> q_ids;     // num_q_slots.
  std::vector<float> q_probs;     // num_q_slots.
};

// Packs `drafts` (expected valid, see DraftRow). Never fails.
PackedDrafts PackDrafts(absl::Span<const DraftRow> drafts);

// Sizes `outputs` for `drafts`.
void ResizeDraftOutputs(const PackedDrafts& drafts, PackedDraftOutputs* outputs);

// The proposals the outputs describe (a row without a token gets the reference's
// per-row INVALID_ARGUMENT). INTERNAL when a count is out of range (a kernel bug).
absl::Status UnpackDrafts(const PackedDrafts& drafts, const PackedDraftOutputs& outputs,
                          std::vector<DraftProposal>* proposals);

}  // namespace accept
}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_PACKED_BATCH_H_
