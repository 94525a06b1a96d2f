// The worker half of Lookahead decoding (coordinator/proposers/lookahead_proposer.h has
// the method; coordinator/proposers/lookahead_window.h the window, the pool and the
// mask). Stateless: the Jacobi window travels in the verify itself, as the sequence's
// computed-only proposals (VerifySequence.num_acceptable onwards, parents as the
// layout says), so nothing is kept per sequence here and a restarted or replaced
// leader serves the next step as well as the old one did.
//
// Propose returns the Jacobi outputs: for every computed-only node, in node order, the
// argmax of its logit row (the raw logits, ties to the lower id: the paper's greedy
// Jacobi step, used under every sampling rule since the window only makes guesses) as a
// point-mass proposal; no parents, no positions. The coordinator, which knows the
// layout, keeps the newest level's. None when the verify carried no window.
#ifndef TANDEM_WORKER_LOOKAHEAD_PROPOSER_H_
#define TANDEM_WORKER_LOOKAHEAD_PROPOSER_H_

#include "worker/target_proposer.h"

namespace tandem {
namespace worker {

class LookaheadTargetProposer final : public TargetProposer {
 public:
  v1::SpeculationMethod method() const override { return v1::SPECULATION_METHOD_LOOKAHEAD; }
  // INVALID_ARGUMENT when in.sequence is null; the logit copy's error otherwise.
  absl::Status Propose(Backend& backend, const ForwardOutputs& outputs,
                       const TargetProposerInput& in, v1::NextCandidates* out) const override;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_LOOKAHEAD_PROPOSER_H_
