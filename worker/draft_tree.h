// Dynamic draft trees (EAGLE-2's expansion, docs/architecture.md §5 "Dynamic draft
// trees"), independent of how the draft's distributions are computed: the draft engine
// feeds each pass to the model, the coordinator's fake worker to its hash model.
//
// A tree grows depth by depth from the last committed token (the root). The root's
// children are the `width` likeliest tokens of the first draft distribution; then, while
// the depth is below `max_depth`, the frontier (the `width` nodes of the newest depth
// with the highest path probability, the product of the draft's probabilities along the
// path) is forwarded in one pass (each node after its parent, see FrontierNode) and
// each frontier node gets its `width` likeliest tokens as children (under the coupled
// rule the draft's own sample first, CoupledChildren). The result is the `budget`
// nodes of highest path probability (ties: the node made first), which is ancestor-closed because a
// child's path probability never exceeds its parent's. Growth stops early once no descendant of the
// frontier could enter the result. Deterministic: only the distributions decide.
#ifndef TANDEM_WORKER_DRAFT_TREE_H_
#define TANDEM_WORKER_DRAFT_TREE_H_

#include <cstdint>
#include <vector>

#include "spec/sampling.h"
#include "tandem/v1/worker.pb.h"

namespace tandem {
namespace worker {

struct DraftTreeNode {
  int32_t token = 0;
  int parent = -1;              // Node index; -1 = child of the root.
  int depth = 1;                // 1 for a child of the root.
  float probability = 0;        // The draft's probability of token after its parent.
  double path_probability = 0;  // Product of probability along the path from the root.
};

// A frontier node to forward: its token at `depth`, after its parent, which is node
// `parent_slot` of the previous frontier (-1: the root, the last committed token).
struct DraftTreeFrontierNode {
  int32_t token = 0;
  int depth = 1;
  int parent_slot = -1;
};

class DraftTreeBuilder {
 public:
  // width in [1, 16], max_depth >= 1, budget >= 1 (callers validate).
  DraftTreeBuilder(int width, int max_depth, int budget);

  // Whether the frontier still needs a distribution per node (initially the root).
  bool NeedsDistributions() const { return !frontier_.empty(); }
  int frontier_size() const { return static_cast<int>(frontier_.size()); }
  // Frontier node i (in creation order) once the root is expanded.
  DraftTreeFrontierNode FrontierNode(int i) const;
  // The path of frontier node `i` (tokens from the root's child down), for callers that
  // compute distributions from a context (the fake worker, reference tests).
  std::vector<int32_t> FrontierPath(int i) const;

  // Adds children from the draft's top tokens after each frontier node (`top[i]` for
  // frontier node i, descending probability; tokens with probability <= 0 and those
  // beyond `width` are ignored), then picks the next frontier.
  void Grow(const std::vector<spec::SparseDistribution>& top);

  // The `budget` best nodes, best first; parents are indices into the result.
  std::vector<DraftTreeNode> Result() const;

 private:
  // Node indices ordered best first: path probability descending, then creation order.
  std::vector<int> Ranked() const;

  int width_;
  int max_depth_;
  int budget_;
  std::vector<DraftTreeNode> nodes_;    // Creation order.
  std::vector<int> frontier_;           // Node indices; {-1} = the root.
  std::vector<int> previous_frontier_;  // The frontier the current one grew from.
};

// The children a node offers under the coupled rule: the draft's own coupled sample
// `coupled_token` first (the token a chain would propose there; the target's coupled
// token shares its Gumbel noise, so it is the likeliest match when p is close to q),
// then `top`'s other tokens in their order, `top.ids.size()` children in all; child r
// takes `top.probs[r]`, the r-th largest probability, so the tree ranks and prices the
// coupled path as it ranks the argmax path under greedy (the draft's own chain is the
// tree's spine either way). `top` itself when the sample is its first token (always at
// temperature 0).
spec::SparseDistribution CoupledChildren(int32_t coupled_token,
                                         const spec::SparseDistribution& top);

// Writes `tree` (a Result) into `out` as point-mass proposals with proposal_parents and
// path_probs (DraftedSequence's tree form), replacing those fields.
void WriteDraftTree(const std::vector<DraftTreeNode>& tree, v1::DraftedSequence* out);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_DRAFT_TREE_H_
