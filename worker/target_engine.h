// Target role: prefill and verification of proposals with the target model.
//
// Verify, per sequence of a VerifyRequest: start_position truncates the cache; the
// uncached committed tokens (>= 1) and the K proposals are fed in one forward pass, as
// a chain, or as a tree when proposal_parents is given (a tree attention mask). Logits
// are taken for the last committed token and for every proposal (K + 1 rows), processed
// with the sequence's sampling, and the resolved rule runs with RandomKey{seed,
// sample_index, position of the first proposal}: spec::AcceptProposals over a chain,
// spec::AcceptTree over a tree (every rule, rejection sampling included: what a proposer
// must send as each sibling's q is in spec/tree_acceptance.h). The cache keeps the committed
// tokens and the accepted proposals: start_position + tokens + num_accepted positions (a
// tree's accepted path is compacted with KeepPath, the other nodes rolled back; the
// correction or bonus token is not cached yet). Log-probabilities of committed tokens,
// when asked, follow spec::CommittedLogProb (spec/sampling.h): processed distribution
// under sampling, log_softmax at temperature 1 under greedy.
//
// Where acceptance runs (verify_acceptance.h): on the backend next to the logits, for
// chains and trees alike (VerifyAcceptConsumer, Backend::VerifyAccept), so only
// committed tokens, the accepted path and log-probabilities leave a GPU.
//
// With num_acceptable set, only proposals [0, num_acceptable) are the chain or tree the
// rule sees; the rest are computed only (their rows reach next_candidates' proposer,
// Lookahead's window) and always rolled back.
//
// Explicit proposal_positions set the proposals' RoPE positions. A sequence may ask
// for the next step's candidates of a target-side proposer (next_candidates): it runs
// inside the same forward, over its logit and hidden rows and the verdict, and its
// candidates come back in VerifiedSequence.next_candidates (target_proposer.h).
//
// Prefill (both roles, see RunPrefill) feeds chunks without logits.
//
// Requests are expected to be valid (request_validation.h); the engine still never
// crashes on bad input. Not thread-safe.
#ifndef TANDEM_WORKER_TARGET_ENGINE_H_
#define TANDEM_WORKER_TARGET_ENGINE_H_

#include "absl/status/statusor.h"
#include "tandem/v1/worker.pb.h"
#include "worker/model_executor.h"
#include "worker/target_proposer.h"

namespace tandem {
namespace worker {

class TargetEngine {
 public:
  // `executor` (and `proposers`, when given: the target-side proposers served,
  // worker/target_proposer.h) are borrowed and must outlive the engine.
  explicit TargetEngine(ModelExecutor* executor, const TargetProposers* proposers = nullptr);

  // Verifies every sequence of `request` in one forward pass; a sequence that asks for
  // next_candidates gets them from its target-side proposer, run over the same pass.
  // INVALID_ARGUMENT, before anything changes, when that method is not served. On an
  // acceptance error (e.g. no finite logits) the batch's sequences are truncated back
  // to their start_position and the error is returned.
  absl::StatusOr<v1::VerifyResponse> Verify(const v1::VerifyRequest& request);

 private:
  ModelExecutor* executor_;
  const TargetProposers* proposers_;
  TargetProposers none_;  // When no proposers were given.
};

// Feeds every sequence's tokens (one forward pass, no logits); unknown ids starting at
// 0 are created. Returns the cached lengths in request order.
absl::StatusOr<v1::PrefillResponse> RunPrefill(ModelExecutor* executor,
                                               const v1::PrefillRequest& request);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_TARGET_ENGINE_H_
