#include "worker/draft_tree.h"

#include <algorithm>
#include <numeric>

namespace tandem {
namespace worker {

DraftTreeBuilder::DraftTreeBuilder(int width, int max_depth, int budget)
    : width_(width), max_depth_(max_depth), budget_(budget), frontier_{-1} {}

std::vector<int32_t> DraftTreeBuilder::FrontierPath(int i) const {
  std::vector<int32_t> path;
  for (int node = frontier_[i]; node >= 0; node = nodes_[node].parent) {
    path.push_back(nodes_[node].token);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

DraftTreeFrontierNode DraftTreeBuilder::FrontierNode(int i) const {
  const DraftTreeNode& node = nodes_[frontier_[i]];
  DraftTreeFrontierNode out;
  out.token = node.token;
  out.depth = node.depth;
  // Every node of the newest depth is a child of the previous frontier.
  const auto parent = std::find(previous_frontier_.begin(), previous_frontier_.end(), node.parent);
  out.parent_slot = node.parent < 0 ? -1 : static_cast<int>(parent - previous_frontier_.begin());
  return out;
}

std::vector<int> DraftTreeBuilder::Ranked() const {
  std::vector<int> order(nodes_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return nodes_[a].path_probability > nodes_[b].path_probability;
  });
  return order;
}

void DraftTreeBuilder::Grow(const std::vector<spec::SparseDistribution>& top) {
  const int first_new = static_cast<int>(nodes_.size());
  for (size_t i = 0; i < frontier_.size() && i < top.size(); ++i) {
    const int parent = frontier_[i];
    const int depth = parent < 0 ? 1 : nodes_[parent].depth + 1;
    const double path = parent < 0 ? 1.0 : nodes_[parent].path_probability;
    const size_t children = std::min(top[i].ids.size(), static_cast<size_t>(width_));
    for (size_t c = 0; c < children && c < top[i].probs.size(); ++c) {
      const float probability = top[i].probs[c];
      if (!(probability > 0)) continue;
      nodes_.push_back({top[i].ids[c], parent, depth, probability, path * probability});
    }
  }
  previous_frontier_ = std::move(frontier_);
  frontier_.clear();
  const int made = static_cast<int>(nodes_.size()) - first_new;
  if (made == 0 || nodes_.back().depth >= max_depth_) return;
  // The next frontier: the newest depth's `width` best nodes.
  std::vector<int> newest(made);
  std::iota(newest.begin(), newest.end(), first_new);
  std::stable_sort(newest.begin(), newest.end(), [&](int a, int b) {
    return nodes_[a].path_probability > nodes_[b].path_probability;
  });
  newest.resize(std::min(made, width_));
  // A descendant's path probability is at most its frontier ancestor's and it is made
  // after every current node, so it cannot outrank the current budget-th node when the
  // best frontier node does not.
  if (static_cast<int>(nodes_.size()) >= budget_) {
    const int last_kept = Ranked()[budget_ - 1];
    if (nodes_[newest[0]].path_probability <= nodes_[last_kept].path_probability) return;
  }
  std::sort(newest.begin(), newest.end());
  frontier_ = std::move(newest);
}

std::vector<DraftTreeNode> DraftTreeBuilder::Result() const {
  std::vector<int> ranked = Ranked();
  ranked.resize(std::min<size_t>(ranked.size(), budget_));
  std::vector<int> index_of(nodes_.size(), -1);
  std::vector<DraftTreeNode> result;
  result.reserve(ranked.size());
  for (int n : ranked) {
    index_of[n] = static_cast<int>(result.size());
    DraftTreeNode node = nodes_[n];
    // A parent ranks before its child (higher or equal path probability, made first).
    node.parent = node.parent < 0 ? -1 : index_of[node.parent];
    result.push_back(node);
  }
  return result;
}

spec::SparseDistribution CoupledChildren(int32_t coupled_token,
                                         const spec::SparseDistribution& top) {
  if (top.ids.empty() || top.ids[0] == coupled_token) return top;
  spec::SparseDistribution out;
  out.ids.push_back(coupled_token);
  for (int32_t id : top.ids) {
    if (out.ids.size() == top.ids.size()) break;
    if (id != coupled_token) out.ids.push_back(id);
  }
  out.probs.assign(top.probs.begin(), top.probs.begin() + out.ids.size());
  return out;
}

void WriteDraftTree(const std::vector<DraftTreeNode>& tree, v1::DraftedSequence* out) {
  out->clear_proposals();
  out->clear_proposal_parents();
  out->clear_path_probs();
  for (const DraftTreeNode& node : tree) {
    v1::ProposedToken* proposal = out->add_proposals();
    proposal->set_token(node.token);
    proposal->add_q_ids(node.token);
    proposal->add_q_probs(1.0f);
    out->add_proposal_parents(node.parent);
    out->add_path_probs(static_cast<float>(node.path_probability));
  }
}

}  // namespace worker
}  // namespace tandem
