// Draft proposals sampled where the logits are: for each draft row, the processed
// distribution (temperature, top-k, top-p), its sparse top-q_size proposal distribution
// q and a token drawn from q, so only the token and q (not the vocabulary-sized logits)
// leave a GPU. Semantics are exactly those of the draft worker's host code:
//   greedy (temperature 0): token = spec::Argmax(logits), q = spec::PointMass(token);
//   coupled rule (DraftRow::coupled, temperature > 0): spec::ProcessLogits,
//              token = spec::GumbelSample(probs, seed, position), q = PointMass(token)
//              (the Gumbel-max proposal of spec/acceptance.h's coupled rule);
//   otherwise: spec::ProcessLogits, q = spec::TopKSparse(probs, q_size),
//              token = spec::SampleFromSparse(q, UniformDouble(seed, kDraftSample, position)).
// With DraftRow::top > 0 a proposal also carries the row's `top` most likely tokens and
// their probabilities (not renormalised; from the processed distribution, or from the
// plain softmax, temperature 1, for a greedy row): what the coordinator ranks
// verification outcomes by when it pre-drafts them (docs/architecture.md §3).
// HostSampleDrafts is that reference; Backend::SampleDrafts is tested against it.
#ifndef TANDEM_KERNELS_ACCEPT_DRAFT_SAMPLE_H_
#define TANDEM_KERNELS_ACCEPT_DRAFT_SAMPLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/accept/verify_accept.h"
#include "spec/sampling.h"

namespace tandem {

// Most entries of a proposal distribution q a backend must support per row.
constexpr int kMaxDraftQSize = 1024;
// Most top tokens a draft row may ask for (DraftRow::top).
constexpr int kMaxDraftTop = 16;

// One row of draft logits to sample a proposal from. Inputs are expected valid:
// sampling passes spec::ValidateSamplingConfig, q_size in [1, kMaxDraftQSize].
struct DraftRow {
  int row = 0;                    // Logit row in the view.
  spec::SamplingConfig sampling;  // temperature 0 = greedy.
  int q_size = 32;                // Most tokens in q.
  bool coupled = false;           // The sequence's rule is coupled: Gumbel-max proposal.
  uint64_t seed = 0;              // The request's seed.
  uint64_t position = 0;          // Absolute sequence position of this proposal.
  int top = 0;                    // [0, kMaxDraftTop]: top tokens to report (0 = none).
};

// The proposal of one row. `status` is INVALID_ARGUMENT (token -1, q empty) when the
// row has no token to propose (every logit NaN); other rows are unaffected.
struct DraftProposal {
  absl::Status status;
  int32_t token = -1;
  spec::SparseDistribution q;
  // The row's DraftRow::top most likely tokens (fewer when fewer have positive
  // probability), descending, with their probabilities (summing to at most 1).
  spec::SparseDistribution top;
};

// The per-row status of draft row `index` without a token to propose.
absl::Status NoDraftTokenError(size_t index);

// Checks rows against a view of `rows` rows: row in [0, rows), q_size in
// [1, kMaxDraftQSize], top in [0, kMaxDraftTop]. INVALID_ARGUMENT naming the draft row
// otherwise.
absl::Status ValidateDraftRows(absl::Span<const DraftRow> drafts, int rows);

// Whether any row asks for top tokens. The device kernels do not compute them yet: a
// device backend answers such a call with the host reference (a copy of the logits).
bool AnyDraftTop(absl::Span<const DraftRow> drafts);

// The reference over row-major host `logits` [rows, vocab]: one proposal per draft row,
// in order (*proposals is replaced). Errors of the call itself (bad shapes, rows out of
// range) are returned; a row without a proposal has its own status.
absl::Status HostSampleDrafts(absl::Span<const float> logits, int vocab,
                              absl::Span<const DraftRow> drafts,
                              std::vector<DraftProposal>* proposals);

}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_DRAFT_SAMPLE_H_
