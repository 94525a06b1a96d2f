// Medusa heads as a target-leader proposer (worker/target_proposer.h): inside each
// verify forward, the heads (model/medusa_heads.h) run on the final-normed hidden row
// the sequence's final committed token was chosen from (TargetProposerInput::last_row),
// head d's top-k gives the candidates at depth d + 1, and the tree is the first
// max_nodes paths of the heads' medusa_choices (most likely first; any leading part is
// a tree). Every node is a point mass (the candidates are deterministic given the
// context), so siblings carry distinct tokens and every acceptance rule, rejection
// sampling included, stays what it is on a tree (docs/architecture.md §4 Trees).
//
// Tensor parallel: only the leader runs proposers; it holds the heads in full and reads
// its own full hidden row (every rank holds it at tp > 1). The heads cost one row per
// sequence per step (4 x (H^2 + V H) multiply-adds for the bundled target, about 2.4
// MFLOP), so sharding them vocab-parallel would save nothing worth a collective and a
// follower protocol change; the result does not depend on tp beyond the hidden row's
// rounding.
#ifndef TANDEM_WORKER_MEDUSA_PROPOSER_H_
#define TANDEM_WORKER_MEDUSA_PROPOSER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "model/medusa_heads.h"
#include "worker/target_proposer.h"

namespace tandem {
namespace worker {

// Indices of the `k` largest entries of row[0, n), largest first, ties to the lower
// index (k is capped at n).
std::vector<int32_t> TopKIndices(const float* row, int n, int k);

// The tree of the first `max_nodes` paths of `choices` (MedusaConfig::choices): path p
// becomes a node whose token is top[p.size() - 1][p.back()] and whose parent is the
// node of p without its last entry (-1 for a one-entry path). `top[d]` is head d's
// top-k, long enough for every rank the used paths name. With `probs` (probs[d][r]: head
// d's probability of top[d][r]; empty: every value is 1) a node's value is the product
// of the probabilities along its path (the heads' estimate that the path is accepted),
// and a path whose value is not above `min_value`, or whose parent was left out, is left
// out, except the first path (choices[0], normally head 0's top token), which is always
// kept: whether a step speculates at all is the coordinator's controller's decision.
// Fills out->proposals (point masses) and, unless the tree is a single chain from the
// root, out->parents.
void BuildMedusaTree(const std::vector<std::vector<int>>& choices,
                     const std::vector<std::vector<int32_t>>& top,
                     const std::vector<std::vector<float>>& probs, int max_nodes, double min_value,
                     v1::NextCandidates* out);

// Softmax of logits[0, n) at `ids` (a head's probabilities of its top tokens).
std::vector<float> SoftmaxAt(const float* logits, int n, const std::vector<int32_t>& ids);

class MedusaTargetProposer final : public TargetProposer {
 public:
  explicit MedusaTargetProposer(std::unique_ptr<MedusaHeads> heads) : heads_(std::move(heads)) {}

  v1::SpeculationMethod method() const override { return v1::SPECULATION_METHOD_MEDUSA; }
  bool wants_hidden_rows() const override { return true; }
  // INTERNAL when the pass has no hidden rows or their size is not the heads' size.
  absl::Status Propose(Backend& backend, const ForwardOutputs& outputs,
                       const TargetProposerInput& in, v1::NextCandidates* out) const override;

 private:
  std::unique_ptr<MedusaHeads> heads_;  // Forward mutates scratch: engine thread only.
  mutable std::vector<float> logits_;   // [num_heads, vocab] of the last call.
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_MEDUSA_PROPOSER_H_
