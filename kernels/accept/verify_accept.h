// Verification on the backend: the target's K + 1 logit rows of each verified chain or
// tree are processed (temperature, top-k, top-p) and the sequence's acceptance rule is
// run where the logits are, so only the committed tokens, the accepted path and (when
// asked) the log-probabilities leave a GPU. Semantics are exactly spec::ProcessLogits +
// spec::AcceptProposals (a chain) or spec::AcceptTree (a tree) + spec::CommittedLogProb;
// HostVerifyAccept below is that reference, and every backend's Backend::VerifyAccept
// is tested against it.
#ifndef TANDEM_KERNELS_ACCEPT_VERIFY_ACCEPT_H_
#define TANDEM_KERNELS_ACCEPT_VERIFY_ACCEPT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "spec/acceptance.h"
#include "spec/sampling.h"

namespace tandem {

// Logits in backend memory, `rows` rows of `vocab` entries, stored as `parts` equal
// vocabulary slices one after the other (the vocab-parallel LM head's all-gather output,
// rank-major): entry (r, v) is at
//   data[(v / slice) * rows * slice + r * slice + v % slice],  slice = vocab / parts.
// parts = 1 is plain row-major [rows, vocab]. Not owned.
struct LogitsView {
  const float* data = nullptr;
  int rows = 0;
  int vocab = 0;
  int parts = 1;
};

// One verified chain or tree of K proposals over logit rows first_row .. first_row + K.
// A chain (parents empty): p_i = row first_row + i - 1 verifies proposal i, the last row
// gives the bonus. A tree (parents[i] in [-1, i), spec/tree_acceptance.h): row first_row
// is p_root, row first_row + i + 1 the distribution after node i. Inputs are expected to
// be valid (worker/request_validation.h): sampling passes spec::ValidateSamplingConfig,
// params spec::ValidateAcceptanceParams for the temperature, tokens are in [0, vocab), q
// is well-formed where the rule reads it, and a tree passes spec::ValidateTreeProposals.
struct VerifyChain {
  int first_row = 0;
  std::vector<spec::Proposal> proposals;
  std::vector<int32_t> parents;  // Empty: a chain; else one per proposal (a tree).
  spec::SamplingConfig sampling;
  spec::AcceptanceParams params;
  spec::RandomKey key;
  bool want_logprobs = false;
};

// What one chain or tree commits: the spec::AcceptanceResult fields, the accepted node
// indices (root side first; a chain's are 0..num_accepted - 1) and, when asked, the
// spec::CommittedLogProb of each committed token (greedy = temperature <= 0) under the
// row it was drawn from (a tree: p_root, then the row after each accepted node).
// `status` is INVALID_ARGUMENT (and the rest empty) when the acceptance fails for this
// chain's data, e.g. a distribution it must sample from has no positive probability
// (all-NaN logits); other chains are unaffected.
struct VerifyOutcome {
  absl::Status status;
  std::vector<int32_t> committed;
  int num_accepted = 0;
  std::vector<int> path;        // num_accepted accepted node indices.
  std::vector<float> logprobs;  // Empty unless want_logprobs.
};

// OK when `view` is well-formed; INVALID_ARGUMENT otherwise (rows < 0, null data with
// rows > 0, vocab <= 0, parts <= 0 or not dividing vocab). Reads no logits.
absl::Status ValidateLogitsView(const LogitsView& view);

// Copies a LogitsView whose data is host memory into row-major [rows, vocab] (*out is
// replaced). ValidateLogitsView's error when the view is malformed.
absl::Status ToRowMajor(const LogitsView& view, std::vector<float>* out);

// Checks that `chains` fit a view of `rows` rows: first_row >= 0 and first_row + K <
// rows for each chain, and a tree's parents are one per proposal in [-1, i) (what the
// algorithms index by). INVALID_ARGUMENT naming the chain otherwise.
absl::Status ValidateChainRows(absl::Span<const VerifyChain> chains, int rows);

// The reference: row-major host `logits` [rows, vocab] (rows = logits.size() / vocab),
// one outcome per chain, in order (*outcomes is replaced). Errors of the call itself
// (bad shapes, a chain outside the rows) are returned; per-chain acceptance errors are
// in VerifyOutcome::status.
absl::Status HostVerifyAccept(absl::Span<const float> logits, int vocab,
                              absl::Span<const VerifyChain> chains,
                              std::vector<VerifyOutcome>* outcomes);

}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_VERIFY_ACCEPT_H_
