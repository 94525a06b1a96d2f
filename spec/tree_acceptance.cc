#include "spec/tree_acceptance.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spec/rng.h"
#include "spec/sampling.h"

namespace tandem {
namespace spec {
namespace {

// A validated tree with its children lists and depths.
struct Tree {
  absl::Span<const int32_t> parents;
  absl::Span<const Proposal> proposals;
  absl::Span<const absl::Span<const float>> target_probs;
  std::vector<std::vector<int>> children;  // [v + 1]: node v's children (v = -1: the root's).
  std::vector<int> depth;                  // depth[i] >= 1.
  int max_depth = 0;                       // D; 0 for an empty tree.

  // The distribution that verifies v's children: p_root for v = -1, else p_v.
  absl::Span<const float> TargetAfter(int v) const { return target_probs[v + 1]; }
  const std::vector<int>& ChildrenOf(int v) const { return children[v + 1]; }
};

Tree MakeTree(absl::Span<const int32_t> parents, absl::Span<const Proposal> proposals,
              absl::Span<const absl::Span<const float>> target_probs) {
  Tree tree;
  tree.parents = parents;
  tree.proposals = proposals;
  tree.target_probs = target_probs;
  tree.children.resize(parents.size() + 1);
  tree.depth.resize(parents.size());
  for (size_t i = 0; i < parents.size(); ++i) {
    const int parent = parents[i];
    tree.children[parent + 1].push_back(static_cast<int>(i));
    tree.depth[i] = parent < 0 ? 1 : tree.depth[parent] + 1;
    tree.max_depth = std::max(tree.max_depth, tree.depth[i]);
  }
  return tree;
}

std::string NodeName(int v) { return v < 0 ? "the root" : absl::StrCat("node ", v); }

// Each node's q, and under rejection that no q gives an earlier sibling's token positive
// probability (siblings are drawn without replacement). `children` as Tree::children.
absl::Status ValidateProposals(absl::Span<const Proposal> proposals,
                               const std::vector<std::vector<int>>& children, size_t vocab,
                               AcceptanceRule rule) {
  for (size_t i = 0; i < proposals.size(); ++i) {
    const Proposal& node = proposals[i];
    absl::Status status = ValidateProposalDistribution(
        node, vocab, absl::StrCat("tree acceptance: node ", i, " (token ", node.token, "): "));
    if (!status.ok()) return status;
  }
  if (rule != AcceptanceRule::kRejection) return absl::OkStatus();
  for (const std::vector<int>& siblings : children) {
    for (size_t b = 1; b < siblings.size(); ++b) {
      const Proposal& later = proposals[siblings[b]];
      for (size_t a = 0; a < b; ++a) {
        const int32_t earlier = proposals[siblings[a]].token;
        const float mass = ProbabilityOf(later.q, earlier);
        if (mass > 0.0f) {
          return absl::InvalidArgumentError(absl::StrCat(
              "tree acceptance: node ", siblings[b], "'s q gives token ", earlier,
              " of its earlier sibling node ", siblings[a], " probability ", mass,
              "; rejection sampling needs each sibling's q without the earlier siblings' "
              "tokens (drawn without replacement)"));
        }
      }
    }
  }
  return absl::OkStatus();
}

// The child of v whose token is `token`, or -1.
int ChildWithToken(const Tree& tree, int v, int32_t token) {
  for (int child : tree.ChildrenOf(v)) {
    if (tree.proposals[child].token == token) return child;
  }
  return -1;
}

// The nodes from the root down to `node` (empty for the root, -1).
std::vector<int> PathTo(const Tree& tree, int node) {
  std::vector<int> path;
  for (int v = node; v >= 0; v = tree.parents[v]) path.push_back(v);
  std::reverse(path.begin(), path.end());
  return path;
}

// Appends the final token and completes `result`.
TreeAcceptanceResult Finish(TreeAcceptanceResult result, int32_t token) {
  result.committed.push_back(token);
  result.num_accepted = static_cast<int>(result.path.size());
  return result;
}

// greedy and coupled: follow the child whose token is the target's own token t at each
// depth (argmax, or the Gumbel-max sample); emit t where no child has it.
absl::StatusOr<TreeAcceptanceResult> AcceptTargetTokens(const Tree& tree, bool coupled,
                                                        const RandomKey& key) {
  TreeAcceptanceResult result;
  for (int v = -1;;) {
    const absl::Span<const float> p = tree.TargetAfter(v);
    const uint64_t offset = result.path.size();
    int32_t token = coupled ? GumbelSample(p, key.seed, key.position + offset) : Argmax(p);
    if (token < 0) return TreeNoMassError(v);
    const int child = ChildWithToken(tree, v, token);
    if (child < 0) {
      // Greedy accepts an argmax match as the chain rule does, but emits only a positive one.
      if (!coupled) token = EmitToken(p, EmitMode::kArgmax, key, offset);
      if (token < 0) return TreeNoMassError(v);
      return Finish(std::move(result), token);
    }
    result.path.push_back(child);
    result.committed.push_back(token);
    v = child;
  }
}

// The distribution P of the rejection rule at one node: p_v as given until the first
// refusal, then normalize(max(0, P - q)) per refused sibling, held as weights / mass.
class Residual {
 public:
  explicit Residual(absl::Span<const float> p) : p_(p) {}

  double At(int32_t token) const {
    return weights_.empty() ? static_cast<double>(p_[token]) : weights_[token] / mass_;
  }

  // P <- normalize(max(0, P - q)); P is kept when that has no positive finite mass.
  void Subtract(const SparseDistribution& q) {
    scratch_.resize(p_.size());
    for (size_t x = 0; x < p_.size(); ++x) {
      scratch_[x] = std::max(0.0, weights_.empty() ? p_[x] : weights_[x] / mass_);
    }
    for (size_t j = 0; j < q.ids.size(); ++j) {
      double& w = scratch_[q.ids[j]];
      w = std::max(0.0, w - static_cast<double>(q.probs[j]));
    }
    double mass = 0.0;
    for (double w : scratch_) {
      if (w > 0.0 && std::isfinite(w)) mass += w;
    }
    if (!(mass > 0.0)) return;
    weights_.swap(scratch_);
    mass_ = mass;
  }

  // The inverse-CDF sample from P with uniform u; -1 when P has no positive entry.
  int32_t Sample(double u) const {
    return weights_.empty() ? SampleFromProbs(p_, u)
                            : SampleFromProbs(absl::MakeConstSpan(weights_), u);
  }

 private:
  absl::Span<const float> p_;
  std::vector<double> weights_;  // Empty: P = p_.
  std::vector<double> scratch_;
  double mass_ = 1.0;
};

// rejection: recursive rejection sampling over each accepted node's children.
absl::StatusOr<TreeAcceptanceResult> AcceptByRejection(const Tree& tree, const RandomKey& key) {
  TreeAcceptanceResult result;
  for (int v = -1;;) {
    const uint64_t index = key.sample_index + result.path.size();
    Residual residual(tree.TargetAfter(v));
    int accepted = -1;
    const std::vector<int>& children = tree.ChildrenOf(v);
    for (size_t rank = 0; rank < children.size() && accepted < 0; ++rank) {
      const Proposal& node = tree.proposals[children[rank]];
      const double q_token = ProbabilityOf(node.q, node.token);
      const double u =
          UniformDouble(key.seed, RandomStream::kAccept, index, static_cast<uint32_t>(rank));
      if (u < std::min(1.0, residual.At(node.token) / q_token)) {
        accepted = children[rank];
      } else {
        residual.Subtract(node.q);
      }
    }
    if (accepted < 0) {
      const int32_t token =
          residual.Sample(UniformDouble(key.seed, RandomStream::kResample, index));
      if (token < 0) return TreeNoMassError(v);
      return Finish(std::move(result), token);
    }
    result.path.push_back(accepted);
    result.committed.push_back(tree.proposals[accepted].token);
    v = accepted;
  }
}

// threshold, ratio, position, typical: the longest root path of passing nodes (ties: the
// larger sum of ln p, then the lower last index), then a correction or the bonus.
absl::StatusOr<TreeAcceptanceResult> AcceptLongestPassingPath(const Tree& tree,
                                                              const AcceptanceParams& params,
                                                              const RandomKey& key) {
  const size_t k = tree.proposals.size();
  std::vector<bool> reached(k, false);  // The node and all its ancestors pass.
  std::vector<double> likelihood(k, 0.0);
  int best = -1;
  for (size_t i = 0; i < k; ++i) {
    const int parent = tree.parents[i];
    if (parent >= 0 && !reached[parent]) continue;
    const absl::Span<const float> p = tree.TargetAfter(parent);
    const Proposal& node = tree.proposals[i];
    if (!PassesDeterministicTest(params, node, p, tree.depth[i], tree.max_depth)) continue;
    reached[i] = true;
    likelihood[i] =
        (parent < 0 ? 0.0 : likelihood[parent]) + std::log(static_cast<double>(p[node.token]));
    if (best < 0 || tree.depth[i] > tree.depth[best] ||
        (tree.depth[i] == tree.depth[best] && likelihood[i] > likelihood[best])) {
      best = static_cast<int>(i);
    }
  }
  TreeAcceptanceResult result;
  result.path = PathTo(tree, best);
  for (int node : result.path) result.committed.push_back(tree.proposals[node].token);
  const EmitMode how =
      tree.ChildrenOf(best).empty() ? BonusMode(params.rule) : CorrectionMode(params.rule);
  const int32_t token = EmitToken(tree.TargetAfter(best), how, key, result.path.size());
  if (token < 0) return TreeNoMassError(best);
  return Finish(std::move(result), token);
}

}  // namespace

absl::Status TreeNoMassError(int v) {
  return absl::InvalidArgumentError(absl::StrCat("tree acceptance: target distribution ", v + 1,
                                                 " (after ", NodeName(v),
                                                 ") has no positive probability"));
}

absl::Status ValidateTree(absl::Span<const int32_t> parents, absl::Span<const Proposal> proposals,
                          size_t vocab) {
  if (parents.size() != proposals.size()) {
    return absl::InvalidArgumentError(absl::StrCat("tree acceptance: ", parents.size(),
                                                   " parents for ", proposals.size(), " nodes"));
  }
  std::vector<std::tuple<int32_t, int32_t, int>> siblings;  // (parent, token, node).
  for (size_t i = 0; i < parents.size(); ++i) {
    const int32_t token = proposals[i].token;
    if (parents[i] < -1 || parents[i] >= static_cast<int64_t>(i)) {
      return absl::InvalidArgumentError(absl::StrCat("tree acceptance: node ", i, " has parent ",
                                                     parents[i], ", must be in [-1, ", i,
                                                     ") (parents precede their children)"));
    }
    if (token < 0 || static_cast<size_t>(token) >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("tree acceptance: node ", i, " token ", token, " outside [0, ", vocab, ")"));
    }
    siblings.emplace_back(parents[i], token, static_cast<int>(i));
  }
  std::sort(siblings.begin(), siblings.end());
  for (size_t j = 1; j < siblings.size(); ++j) {
    const auto& [parent, token, node] = siblings[j];
    const auto& [previous_parent, previous_token, previous_node] = siblings[j - 1];
    if (previous_parent == parent && previous_token == token) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tree acceptance: nodes ", previous_node, " and ", node, " are children of ",
          NodeName(parent), " with the same token ", token, " (siblings must be distinct)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTreeProposals(absl::Span<const int32_t> parents,
                                   absl::Span<const Proposal> proposals, size_t vocab,
                                   AcceptanceRule rule) {
  absl::Status status = ValidateTree(parents, proposals, vocab);
  if (!status.ok() || !RuleReadsProposalDistribution(rule)) return status;
  return ValidateProposals(proposals, MakeTree(parents, proposals, {}).children, vocab, rule);
}

absl::StatusOr<TreeAcceptanceResult> AcceptTree(
    absl::Span<const int32_t> parents, absl::Span<const Proposal> proposals,
    absl::Span<const absl::Span<const float>> target_probs, const AcceptanceParams& params,
    const RandomKey& key) {
  absl::Status status = ValidateRuleParameters(params);
  if (!status.ok()) return status;
  status = ValidateTargetDistributions(target_probs, proposals.size());
  if (!status.ok()) return status;
  status = ValidateTreeProposals(parents, proposals, target_probs[0].size(), params.rule);
  if (!status.ok()) return status;
  const Tree tree = MakeTree(parents, proposals, target_probs);
  switch (params.rule) {
    case AcceptanceRule::kGreedy:
      return AcceptTargetTokens(tree, /*coupled=*/false, key);
    case AcceptanceRule::kCoupled:
      return AcceptTargetTokens(tree, /*coupled=*/true, key);
    case AcceptanceRule::kRejection:
      return AcceptByRejection(tree, key);
    default:
      return AcceptLongestPassingPath(tree, params, key);
  }
}

}  // namespace spec
}  // namespace tandem
