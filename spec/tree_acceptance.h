// Acceptance rules on token trees: the reference for a verify step whose candidates form
// a tree instead of a chain (spec/acceptance.h is the chain). Pure functions, no I/O.
//
// The tree. K nodes; node i holds a proposed token d_i, the distribution q_i it was
// drawn from (spec::Proposal) and parents[i] in [-1, i): -1 makes it a child of the root
// (the last committed token), and parents precede their children (index order is
// topological). depth(i) = 1 for a child of the root, depth(parents[i]) + 1 otherwise;
// the tree's depth D is the largest. The children of a node are taken in index order;
// a child's rank is its place among its siblings (0, 1, ...). Siblings carry distinct
// tokens (every rule: under greedy and coupled at most one child can then match, the
// rejection rule samples siblings without replacement, and for the lossy rules a repeated
// sibling is the same candidate twice). The target: target_probs[0] = p_root, the
// processed distribution after the root, verifies the root's children;
// target_probs[i + 1] = p_i, the distribution after node i, verifies node i's children.
// A node v (or the root, depth 0) offers its children for generated index
// n = sample_index + depth(v) and absolute position a = key.position + depth(v).
//
// The result: an accepted path (a root child, one of its children, ..., possibly empty)
// ending at e (the root when empty), then one token drawn from p_e: a correction when e
// has children (all refused), the bonus when e is a leaf. So 1..D+1 tokens are committed.
//
// Rules (p = target, q = proposal, after the request's processing, spec/sampling.h):
//   greedy     From the root: at v, t = argmax p_v; if a child of v has token t accept it
//              and continue from it, else emit t. The accepted path is the longest root
//              path whose every node is its parent's argmax. Token-identical to
//              target-only greedy decoding.
//   coupled    As greedy with t = GumbelSample(p_v, seed, a) (spec/acceptance.h): every
//              committed token is the target's own seeded Gumbel-max token at its
//              position, so the output is token-identical to target-only seeded sampling
//              for every tree, and lossless.
//   rejection  Recursive rejection sampling without replacement over siblings (Jeon et
//              al. 2024, "Recursive Speculative Decoding: Accelerating LLM Inference via
//              Sampling Without Replacement", arXiv 2402.14160; the chain rule is its
//              one-child case). At v with children c_1..c_r in rank order, P = p_v (used
//              as given); for j = 1..r: accept c_j iff u_j < min(1, P(d_cj) / q_cj(d_cj))
//              with u_j = UniformDouble(seed, kAccept, n, j - 1), and continue from c_j;
//              else P <- normalize(max(0, P - q_cj)) (P is kept when that has no mass)
//              and try c_{j+1}. When every child is refused (or v is a leaf) emit the
//              inverse-CDF sample from P with UniformDouble(seed, kResample, n).
//              What q_cj must be: the distribution c_j's token was really drawn from,
//              given the context and its earlier siblings. A draft sampling r siblings
//              without replacement from its q sends q_c1 = q and q_cj = q with
//              d_c1..d_c(j-1) removed, renormalised; a deterministic proposer sends point
//              masses (then P is tested like the target sampling among the candidates
//              in turn). So q_cj must give earlier siblings' tokens probability 0
//              (checked: INVALID_ARGUMENT); in particular one i.i.d. q for all siblings
//              (SpecInfer's multi-step speculative sampling, Miao et al., arXiv
//              2305.09781) is refused: with distinct siblings it would not be lossless.
//              Why it is lossless. (1) One candidate: x ~ q, accepted with probability
//              min(1, P(x)/q(x)), else Y: P(out = y) = min(P(y), q(y)) + (1 - sum_x
//              min(P(x), q(x))) R(y) = P(y) when, given a refusal of x, Y ~ R =
//              normalize(max(0, P - q)) whatever x was (R does not depend on x).
//              (2) Siblings, by induction on the siblings left: the rest of the loop after
//              refusing c_j is the same procedure with target R and candidates
//              c_(j+1).. drawn from their q given c_1..c_j (the draft's draws and the
//              u_j are independent), so by the hypothesis it outputs exactly R, for
//              every value of d_cj; by (1) the level outputs exactly p_v. (3) Depth: given
//              the accepted child c, the next token comes from the same procedure at c,
//              exactly p_c, and given a correction the next step samples p_(token) afresh;
//              so every committed token, given the ones before it, is distributed as the
//              target's next-token distribution: the step is target-only sampling.
//   threshold, ratio, position, typical (lossy, opt-in): node i passes iff the chain
//              rule's test (spec/acceptance.h) passes for d_i against p_parent(i), with
//              the position rule's i = depth(i) and K = D. The accepted path is the
//              longest root path of passing nodes; ties go to the larger likelihood
//              sum of ln p_parent(x)(d_x) over its nodes x, then to the lower index of its
//              last node. Then from p_e: a correction as the chain's (typical: argmax;
//              threshold, ratio, position: the kResample sample at n) when e has
//              children, the bonus (the kResample sample at n) when e is a leaf.
//
// A chain (parents[i] = i - 1) gives, for every rule, exactly AcceptProposals' result
// (keys included: a chain's nodes all have rank 0, the chain rule's draws). Random draws
// are keyed by (seed, generated index at that depth, sibling rank) only, so results never
// depend on batching, worker or call order.
#ifndef TANDEM_SPEC_TREE_ACCEPTANCE_H_
#define TANDEM_SPEC_TREE_ACCEPTANCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "spec/acceptance.h"
#include "spec/acceptance_params.h"

namespace tandem {
namespace spec {

struct TreeAcceptanceResult {
  std::vector<int> path;           // Accepted node indices, a root-to-node path, root side first.
  std::vector<int32_t> committed;  // Tokens of `path`, then the correction or bonus token.
  int num_accepted = 0;            // path.size(); committed.size() - 1.
};

// The structure of a tree over vocabulary [0, vocab): parents.size() == proposals.size();
// parents[i] in [-1, i); tokens in [0, vocab); no two children of one node (or of the
// root) with the same token. INVALID_ARGUMENT naming the node and the problem otherwise.
// q is not checked (ValidateTreeProposals and AcceptTree check it for the rules that read it).
absl::Status ValidateTree(absl::Span<const int32_t> parents, absl::Span<const Proposal> proposals,
                          size_t vocab);

// Everything AcceptTree checks of the tree itself under `rule`, before any target is read:
// ValidateTree; then, when the rule reads q (rejection, ratio), each node's q
// (ValidateProposalDistribution); and under rejection that no node's q gives an earlier
// sibling's token positive probability (siblings are drawn without replacement). OK, or
// INVALID_ARGUMENT naming the node and the problem. Lets a server refuse a bad tree
// before it computes anything.
absl::Status ValidateTreeProposals(absl::Span<const int32_t> parents,
                                   absl::Span<const Proposal> proposals, size_t vocab,
                                   AcceptanceRule rule);

// The INVALID_ARGUMENT AcceptTree returns when the distribution after node v (-1: the
// root), target_probs[v + 1], has no positive probability where a token must be emitted.
absl::Status TreeNoMassError(int v);

// Runs `params.rule` over the tree (parents[i], proposals[i]) with the K + 1 dense
// target distributions (target_probs[0] = p_root, target_probs[i + 1] = p_i; only read
// during the call). INVALID_ARGUMENT, saying what is wrong, when: the parameters are out
// of range; target_probs is not K + 1 non-empty spans of one size; ValidateTreeProposals
// fails (over the target's vocabulary); or a distribution to emit from has no positive
// entry.
absl::StatusOr<TreeAcceptanceResult> AcceptTree(
    absl::Span<const int32_t> parents, absl::Span<const Proposal> proposals,
    absl::Span<const absl::Span<const float>> target_probs, const AcceptanceParams& params,
    const RandomKey& key);

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_TREE_ACCEPTANCE_H_
