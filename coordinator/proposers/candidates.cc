#include "coordinator/proposers/candidates.h"

#include <algorithm>

namespace tandem::coordinator {
namespace {

// Depth of every node (1 under the root); parents[i] < i is the Candidates contract.
std::vector<int> NodeDepths(const Candidates& c) {
  std::vector<int> depth(c.size());
  for (int i = 0; i < c.size(); ++i) {
    const int parent = c.parents.empty() ? i - 1 : c.parents[i];
    depth[i] = parent < 0 ? 1 : depth[parent] + 1;
  }
  return depth;
}

}  // namespace

int Candidates::depth() const {
  const int n = acceptable >= 0 ? std::min(acceptable, size()) : size();
  if (parents.empty()) return n;
  const std::vector<int> d = NodeDepths(*this);
  return n == 0 ? 0 : *std::max_element(d.begin(), d.begin() + n);
}

void Candidates::TruncateDepth(int n) {
  n = std::max(n, 0);
  const std::vector<int> all_depths = NodeDepths(*this);
  if (all_depths.empty() || *std::max_element(all_depths.begin(), all_depths.end()) <= n) return;
  if (acceptable >= 0) {  // The computed-only nodes follow the acceptable ones.
    const int keep = std::min(acceptable, size());
    tokens.resize(keep);
    if (!parents.empty()) parents.resize(keep);
    if (!positions.empty()) positions.resize(std::min<int>(keep, positions.size()));
    acceptable = -1;
  }
  if (parents.empty()) {
    if (n < size()) tokens.resize(n);
    if (!positions.empty() && n < static_cast<int>(positions.size())) positions.resize(n);
    return;
  }
  const std::vector<int> depth = NodeDepths(*this);
  std::vector<int> index(size(), -1);  // Old index -> new index (-1: dropped).
  int kept = 0;
  for (int i = 0; i < size(); ++i) {
    if (depth[i] > n) continue;
    index[i] = kept;
    tokens[kept] = tokens[i];
    parents[kept] = parents[i] < 0 ? -1 : index[parents[i]];
    if (!positions.empty()) positions[kept] = positions[i];
    ++kept;
  }
  tokens.resize(kept);
  parents.resize(kept);
  if (!positions.empty()) positions.resize(kept);
}

v1::ProposedToken PointMassProposal(int32_t token) {
  v1::ProposedToken p;
  p.set_token(token);
  p.add_q_ids(token);
  p.add_q_probs(1.0f);
  return p;
}

}  // namespace tandem::coordinator
