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
  for (int i = 0; i < n; ++i) {
    const int parent = drafted.proposal_parents(i);
    if (parent < -1 || parent >= i) return;  // Not a tree in order: stop here.
    if (parent >= 0 && kept_index[parent] < 0) continue;
    if (c->size() >= base_nodes && !(drafted.path_probs(i) > min_value)) continue;
    kept_index[i] = c->size();
    c->tokens.push_back(drafted.proposals(i));
    c->parents.push_back(parent < 0 ? -1 : kept_index[parent]);
  }
}

}  // namespace tandem::coordinator
