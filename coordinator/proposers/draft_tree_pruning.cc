#include "coordinator/proposers/draft_tree_pruning.h"

#include <vector>

namespace tandem::coordinator {

void PruneDraftTree(const v1::DraftedSequence& drafted, int base_nodes, double min_value,
                    Candidates* c) {
  c->tokens.clear();
  c->parents.clear();
  const int n = drafted.proposals_size();
  if (drafted.proposal_parents_size() != n || drafted.path_probs_size() != n) return;
  std::vector<int32_t> kept_index(n, -1);  // Node -> its index among the kept ones.
  // The chain: from the root, each node's first (likeliest) child, base_nodes deep.
  std::vector<int> chain_depth(n, 0);
  std::vector<char> child_seen(n + 1, 0);  // Per parent + 1 (0: the root).
  for (int i = 0; i < n; ++i) {
    const int parent = drafted.proposal_parents(i);
    if (parent < -1 || parent >= i) return;  // Not a tree in order: stop here.
    if (!child_seen[parent + 1] && (parent < 0 || chain_depth[parent] > 0)) {
      chain_depth[i] = parent < 0 ? 1 : chain_depth[parent] + 1;
    }
    child_seen[parent + 1] = 1;
    if (parent >= 0 && kept_index[parent] < 0) continue;
    const bool on_chain = chain_depth[i] > 0 && chain_depth[i] <= base_nodes;
    if (!on_chain && !(drafted.path_probs(i) > min_value)) continue;
    kept_index[i] = c->size();
    c->tokens.push_back(drafted.proposals(i));
    c->parents.push_back(parent < 0 ? -1 : kept_index[parent]);
  }
}

}  // namespace tandem::coordinator
