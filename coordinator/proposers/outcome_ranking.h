// The verification outcomes of a chain of draft proposals, ranked by the draft's own
// probabilities: what the speculation cache pre-drafts while the target verifies
// (docs/architecture.md §3, "Speculation cache"). Pure; no I/O.
//
// An outcome of verifying d_1..d_K is (j, t): the target accepts d_1..d_j and then
// emits t (t != d_{j+1} for j < K; for j = K, t is the bonus token). With a_i the
// draft's probability of d_i at its position (its top tokens, else its q), the draft
// predicts
//   P(j, t) = a_1 ... a_j * p_{j+1}(t)            for j < K, t among position j+1's top
//                                                 tokens other than d_{j+1};
//   P(K, guess) = a_1 ... a_K * mean(a_1..a_K)    for j = K, with the bonus token the
//                                                 draft's own guess (drafted with it, so
//                                                 its probability is not known yet: the
//                                                 mean confidence stands in for it).
// This is the draft's estimate, not the target's: it only orders what to pre-draft.
#ifndef TANDEM_COORDINATOR_PROPOSERS_OUTCOME_RANKING_H_
#define TANDEM_COORDINATOR_PROPOSERS_OUTCOME_RANKING_H_

#include <cstdint>
#include <vector>

#include "tandem/v1/worker.pb.h"

namespace tandem::coordinator {

struct StepOutcome {
  int accepted = 0;        // j, [0, K].
  int32_t token = -1;      // t for j < K; -1 for j = K (the bonus is the draft's guess).
  double probability = 0;  // The draft's P(j, t) above.
};

// The at most `max_outcomes` most likely outcomes of verifying `proposals`, descending
// by probability (ties: fewer accepted first, then the lower token). `top` holds the
// draft's top tokens at each proposal's position (parallel to `proposals`; shorter or
// empty where unknown: those positions offer no j < K outcome and count a_i from q).
// Empty when `proposals` is empty or max_outcomes <= 0.
std::vector<StepOutcome> RankOutcomes(const std::vector<v1::ProposedToken>& proposals,
                                      const std::vector<v1::TopTokens>& top, int max_outcomes);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_OUTCOME_RANKING_H_
