// Tree acceptance (spec/tree_acceptance.h): validation, hand-built trees for every rule,
// token identity of greedy and coupled with target-only decoding on random trees, and
// equality with AcceptProposals on chains. (Losslessness by simulation:
// tree_acceptance_stats_test.)
#include "spec/tree_acceptance.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec/acceptance_test_util.h"
#include "spec/rng.h"
#include "spec/sampling.h"

namespace tandem {
namespace spec {
namespace {

using testing::Dense;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Propose;
using testing::RandomDistribution;
using testing::ResampleAt;
using testing::Rule;
using testing::Targets;
using testing::WithMassAt;

// A tree with its K + 1 targets: targets.dists[0] = p_root, [i + 1] = p after node i.
struct TreeCase {
  std::vector<int32_t> parents;
  std::vector<Proposal> nodes;
  Targets targets;
};

absl::StatusOr<TreeAcceptanceResult> RunTree(const TreeCase& c, AcceptanceRule rule,
                                             RandomKey key = {1, 0, 0}) {
  return AcceptTree(c.parents, c.nodes, c.targets.spans, Rule(rule), key);
}

TreeAcceptanceResult RunOk(const TreeCase& c, AcceptanceRule rule, RandomKey key = {1, 0, 0}) {
  absl::StatusOr<TreeAcceptanceResult> r = RunTree(c, rule, key);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : TreeAcceptanceResult{};
}

// ---------------------------------------------------------------- validation

TEST(TreeAcceptanceTest, RejectsMalformedTreesWithAMessage) {
  const Dense p = {0.25f, 0.25f, 0.25f, 0.25f};
  const auto expect_bad = [&](TreeCase c, AcceptanceRule rule, const char* what) {
    const absl::Status s = RunTree(c, rule).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_THAT(std::string(s.message()), HasSubstr(what));
  };
  const AcceptanceRule greedy = AcceptanceRule::kGreedy;
  expect_bad({{-1}, {Propose(1), Propose(2)}, Targets({p, p, p})}, greedy, "1 parents for 2");
  expect_bad({{-1, -2}, {Propose(1), Propose(2)}, Targets({p, p, p})}, greedy,
             "node 1 has parent -2");
  expect_bad({{-1, 1}, {Propose(1), Propose(2)}, Targets({p, p, p})}, greedy,
             "node 1 has parent 1, must be in [-1, 1)");
  expect_bad({{0}, {Propose(1)}, Targets({p, p})}, greedy, "node 0 has parent 0");
  expect_bad({{-1, 0}, {Propose(1), Propose(4)}, Targets({p, p, p})}, greedy,
             "node 1 token 4 outside [0, 4)");
  expect_bad({{-1, 0, -1}, {Propose(1), Propose(2), Propose(1)}, Targets({p, p, p, p})}, greedy,
             "nodes 0 and 2 are children of the root with the same token 1");
  expect_bad({{-1, 0, 0}, {Propose(1), Propose(3), Propose(3)}, Targets({p, p, p, p})},
             AcceptanceRule::kTypical,
             "nodes 1 and 2 are children of node 0 with the same token 3");
  expect_bad({{-1}, {Propose(1)}, Targets({p})}, greedy, "need 2 target distributions");
  expect_bad({{-1}, {Propose(1)}, Targets({p, Dense{1.0f}})}, greedy, "has 1 entries");
  // The rules that read q check it, naming the node.
  expect_bad({{-1, -1}, {Propose(1), Proposal{2, {{2}, {0.5f}}}}, Targets({p, p, p})},
             AcceptanceRule::kRejection, "node 1 (token 2): q probs sum to");
  expect_bad({{-1}, {Proposal{1, {}}}, Targets({p, p})}, AcceptanceRule::kRatio,
             "node 0 (token 1)");
  // Rejection: a later sibling's q must not cover an earlier sibling's token.
  const SparseDistribution iid = {{1, 2}, {0.5f, 0.5f}};
  expect_bad({{-1, -1}, {Proposal{1, iid}, Proposal{2, iid}}, Targets({p, p, p})},
             AcceptanceRule::kRejection, "node 1's q gives token 1 of its earlier sibling node 0");
  const SparseDistribution without_1 = {{2}, {1.0f}};
  EXPECT_TRUE(RunTree({{-1, -1}, {Proposal{1, iid}, Proposal{2, without_1}}, Targets({p, p, p})},
                      AcceptanceRule::kRejection)
                  .ok());
  // Same tokens under different parents are fine; a distribution to emit from needs mass.
  EXPECT_TRUE(RunTree({{-1, 0}, {Propose(1), Propose(1)}, Targets({p, p, p})}, greedy).ok());
  const Dense zero(4, 0.0f);
  expect_bad({{-1}, {Propose(1)}, Targets({zero, p})}, AcceptanceRule::kThreshold,
             "target distribution 0 (after the root) has no positive probability");
  AcceptanceParams bad = Rule(AcceptanceRule::kTypical);
  bad.delta = 0.0f;
  EXPECT_EQ(AcceptTree({}, {}, Targets({p}).spans, bad, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ValidateTreeProposals answers, before any target is read, exactly what AcceptTree
// answers about the tree and its q.
TEST(TreeAcceptanceTest, ValidateTreeProposalsChecksWhatAcceptTreeChecksOfTheTree) {
  const Dense p = {0.25f, 0.25f, 0.25f, 0.25f};
  const SparseDistribution iid = {{1, 2}, {0.5f, 0.5f}};
  const SparseDistribution without_1 = {{2}, {1.0f}};
  const struct {
    TreeCase tree;
    AcceptanceRule rule;
    bool ok;
  } cases[] = {
      {{{-1, 1}, {Propose(1), Propose(2)}, Targets({p, p, p})}, AcceptanceRule::kGreedy, false},
      {{{-1, 0, -1}, {Propose(1), Propose(2), Propose(1)}, Targets({p, p, p, p})},
       AcceptanceRule::kCoupled,
       false},
      {{{-1, -1}, {Proposal{1, iid}, Proposal{2, iid}}, Targets({p, p, p})},
       AcceptanceRule::kRejection,
       false},
      {{{-1, -1}, {Proposal{1, iid}, Proposal{2, iid}}, Targets({p, p, p})},
       AcceptanceRule::kRatio,
       true},
      {{{-1, -1}, {Proposal{1, iid}, Proposal{2, without_1}}, Targets({p, p, p})},
       AcceptanceRule::kRejection,
       true},
      {{{-1}, {Proposal{1, {}}}, Targets({p, p})}, AcceptanceRule::kRatio, false},
      {{{-1}, {Proposal{1, {}}}, Targets({p, p})}, AcceptanceRule::kTypical, true},
  };
  for (const auto& c : cases) {
    const absl::Status s = ValidateTreeProposals(c.tree.parents, c.tree.nodes, 4, c.rule);
    EXPECT_EQ(s.ok(), c.ok) << s;
    if (!c.ok) EXPECT_EQ(s, RunTree(c.tree, c.rule).status());
  }
}

// ---------------------------------------------------------------- greedy and coupled

// Root argmax 3 -> node 1; p_1's argmax 2 -> node 4; p_4's argmax 1 matches no child of
// node 4. Node 5 (p_0's argmax under a refused node) is never reached.
TEST(TreeAcceptanceTest, GreedyFollowsTheArgmaxChildAndEmitsTheArgmaxAtTheMiss) {
  const int v = 6;
  TreeCase c{{-1, -1, -1, 1, 1, 0, 4},
             {Propose(1), Propose(3), Propose(5), Propose(4), Propose(2), Propose(2), Propose(0)},
             Targets({WithMassAt(v, 3, 0.4f), WithMassAt(v, 2, 0.5f), WithMassAt(v, 2, 0.5f),
                      Dense(v, 1.0f / v), Dense(v, 1.0f / v), WithMassAt(v, 1, 0.6f),
                      Dense(v, 1.0f / v), WithMassAt(v, 5, 0.9f)})};
  TreeAcceptanceResult r = RunOk(c, AcceptanceRule::kGreedy);
  EXPECT_THAT(r.path, ElementsAre(1, 4));
  EXPECT_THAT(r.committed, ElementsAre(3, 2, 1));
  EXPECT_EQ(r.num_accepted, 2);
  // With p_4's argmax at 0 the leaf node 6 is accepted and the bonus is argmax p_6.
  c.targets =
      Targets({c.targets.dists[0], c.targets.dists[1], c.targets.dists[2], c.targets.dists[3],
               c.targets.dists[4], WithMassAt(v, 0, 0.6f), c.targets.dists[6], c.targets.dists[7]});
  r = RunOk(c, AcceptanceRule::kGreedy);
  EXPECT_THAT(r.path, ElementsAre(1, 4, 6));
  EXPECT_THAT(r.committed, ElementsAre(3, 2, 0, 5));
}

// A target "model" over a small vocabulary: the next-token distribution of a prefix.
Dense TargetAfter(const std::vector<int32_t>& prefix, int vocab) {
  uint32_t h = 2166136261u;
  for (int32_t t : prefix) h = (h ^ static_cast<uint32_t>(t + 1)) * 16777619u;
  std::mt19937 gen(h);
  return RandomDistribution(&gen, vocab, 1, 2.0f);
}

// The target's own token after `prefix` at absolute position `position`.
int32_t TargetToken(const Dense& p, bool coupled, uint64_t seed, uint64_t position) {
  return coupled ? GumbelSample(p, seed, position) : Argmax(p);
}

// A random tree (nodes appended breadth-first) whose every node's children hold the
// target's own token with probability 0.6, next to random distinct tokens.
TreeCase RandomTreeOverModel(std::mt19937* gen, int vocab, bool coupled, const RandomKey& key) {
  TreeCase c{{}, {}, Targets({})};
  std::vector<std::vector<int32_t>> prefixes = {{}};  // [v + 1]: the tokens up to node v.
  std::vector<Dense> dists = {TargetAfter({}, vocab)};
  for (int v = -1; v < static_cast<int>(c.parents.size()) && c.parents.size() < 14; ++v) {
    const std::vector<int32_t> prefix = prefixes[v + 1];  // A copy: prefixes grows below.
    if (prefix.size() >= 4) continue;
    std::vector<int32_t> tokens(vocab);
    for (int t = 0; t < vocab; ++t) tokens[t] = t;
    std::shuffle(tokens.begin(), tokens.end(), *gen);
    tokens.resize((*gen)() % 4);
    const int32_t own = TargetToken(dists[v + 1], coupled, key.seed, key.position + prefix.size());
    if (!tokens.empty() && (*gen)() % 10 < 6 &&
        std::find(tokens.begin(), tokens.end(), own) == tokens.end()) {
      tokens[(*gen)() % tokens.size()] = own;
    }
    for (int32_t t : tokens) {
      c.parents.push_back(v);
      c.nodes.push_back(Propose(t));
      std::vector<int32_t> next = prefix;
      next.push_back(t);
      dists.push_back(TargetAfter(next, vocab));
      prefixes.push_back(std::move(next));
    }
  }
  c.targets = Targets(dists);
  return c;
}

// greedy and coupled commit exactly what target-only decoding (one token per step from
// the model) commits: the accepted path is the target's own tokens as far as the tree
// has them, and the emitted token is the target's next one.
TEST(TreeAcceptanceTest, GreedyAndCoupledAreTokenIdenticalToTargetOnlyDecoding) {
  std::mt19937 gen(41);
  const int vocab = 7;
  for (bool coupled : {false, true}) {
    int longest = 0;
    for (int trial = 0; trial < 400; ++trial) {
      const RandomKey key{static_cast<uint64_t>(trial) + 3, 5, 100 + static_cast<uint64_t>(trial)};
      const TreeCase c = RandomTreeOverModel(&gen, vocab, coupled, key);
      const TreeAcceptanceResult r =
          RunOk(c, coupled ? AcceptanceRule::kCoupled : AcceptanceRule::kGreedy, key);
      std::vector<int32_t> own;
      for (size_t m = 0; m < r.committed.size(); ++m) {
        own.push_back(TargetToken(TargetAfter(own, vocab), coupled, key.seed, key.position + m));
      }
      ASSERT_EQ(r.committed, own) << "trial " << trial << " coupled " << coupled;
      ASSERT_EQ(r.path.size() + 1, r.committed.size());
      for (size_t m = 0; m < r.path.size(); ++m) {
        EXPECT_EQ(c.nodes[r.path[m]].token, r.committed[m]);
        EXPECT_EQ(c.parents[r.path[m]], m == 0 ? -1 : r.path[m - 1]);
      }
      const int last = r.path.empty() ? -1 : r.path.back();
      for (size_t i = 0; i < c.nodes.size(); ++i) {  // The path could not go further.
        if (c.parents[i] == last) {
          EXPECT_NE(c.nodes[i].token, r.committed.back());
        }
      }
      longest = std::max(longest, r.num_accepted);
    }
    EXPECT_GE(longest, 3) << "coupled " << coupled;
  }
}

// ---------------------------------------------------------------- rejection

// Two point-mass siblings a = 0 (p 0) and b = 1: a is always refused, P = p stays (p has
// no mass at a), and b is accepted iff the rank-1 draw u < p(b) = 0.5; otherwise the
// correction is P without b: token 2. Depth 2 (b's child c = 3, sure) uses index n + 1.
TEST(TreeAcceptanceTest, RejectionTriesSiblingsInRankOrderWithTheDocumentedDraws) {
  const Dense root = {0.0f, 0.5f, 0.5f, 0.0f};
  const Dense sure_3 = {0.0f, 0.0f, 0.0f, 1.0f};
  const Dense bonus = {0.2f, 0.3f, 0.1f, 0.4f};
  const TreeCase c{
      {-1, -1, 1}, {Propose(0), Propose(1), Propose(3)}, Targets({root, root, sure_3, bonus})};
  int accepted = 0;
  for (uint64_t index = 0; index < 200; ++index) {
    const uint64_t seed = 9;
    const TreeAcceptanceResult r = RunOk(c, AcceptanceRule::kRejection, {seed, index, 0});
    const bool accept_b = UniformDouble(seed, RandomStream::kAccept, index, 1) < 0.5;
    if (accept_b) {
      ++accepted;
      EXPECT_THAT(r.path, ElementsAre(1, 2));
      EXPECT_THAT(r.committed, ElementsAre(1, 3, ResampleAt(bonus, seed, index + 2)));
    } else {
      EXPECT_TRUE(r.path.empty());
      EXPECT_THAT(r.committed, ElementsAre(2));
    }
  }
  EXPECT_GT(accepted, 60);
  EXPECT_LT(accepted, 140);
}

// Point masses at a = 0, b = 1 with p = (0.3, 0.3, 0.4): P(a) = 0.3; after refusing a,
// P = (0, 0.3, 0.4) / 0.7 and b is accepted with 0.3 / 0.7; after refusing both, only 2
// is left. So the outputs are 0, 1, 2 with probabilities 0.3, 0.3, 0.4 (lossless), and
// a correction is always 2.
TEST(TreeAcceptanceTest, RejectionRemovesEachRefusedSiblingsQFromTheResidual) {
  const Dense p = {0.3f, 0.3f, 0.4f};
  const TreeCase c{{-1, -1}, {Propose(0), Propose(1)}, Targets({p, p, p})};
  std::map<int32_t, int> first;
  constexpr int kTrials = 20000;
  for (uint64_t index = 0; index < kTrials; ++index) {
    const TreeAcceptanceResult r = RunOk(c, AcceptanceRule::kRejection, {4, index * 3, 0});
    ++first[r.committed[0]];
    if (r.num_accepted == 0) {
      EXPECT_EQ(r.committed[0], 2);
    } else {
      EXPECT_EQ(r.committed[0], c.nodes[r.path[0]].token);
    }
  }
  // Binomial sd <= 0.0035 at N = 20000; 5 sd.
  EXPECT_NEAR(first[0] / double(kTrials), 0.3, 0.018);
  EXPECT_NEAR(first[1] / double(kTrials), 0.3, 0.018);
  EXPECT_NEAR(first[2] / double(kTrials), 0.4, 0.018);
}

// A sibling drawn from q without the earlier sibling's token: after a = 0 (q(a) = 0.5)
// is refused, P = normalize(max(0, p - q)); sibling b = 2 with q_b = (0, 0.4, 0.6) / 1 is
// tested against that P, not against p.
TEST(TreeAcceptanceTest, RejectionTestsLaterSiblingsAgainstTheResidual) {
  const Dense p = {0.2f, 0.2f, 0.6f};
  const SparseDistribution q = {{0, 1, 2}, {0.5f, 0.2f, 0.3f}};
  const SparseDistribution q_without_0 = {{1, 2}, {0.4f, 0.6f}};
  const TreeCase c{{-1, -1}, {Proposal{0, q}, Proposal{2, q_without_0}}, Targets({p, p, p})};
  // max(0, p - q) = (0, 0, 0.3): P = (0, 0, 1); b is accepted with min(1, 1 / 0.6) = 1.
  for (uint64_t index = 0; index < 100; ++index) {
    const TreeAcceptanceResult r = RunOk(c, AcceptanceRule::kRejection, {6, index, 0});
    const bool accept_a = UniformDouble(6, RandomStream::kAccept, index) < 0.2 / 0.5;
    EXPECT_THAT(r.path, ElementsAre(accept_a ? 0 : 1));
  }
}

// ---------------------------------------------------------------- lossy rules

// Typical (epsilon 0.09 decides here): node 0 fails, so its passing descendants are
// out; nodes 1 -> 3 and 2 -> 4 both pass to depth 2 and 2 -> 4 is likelier
// (0.5 * 0.5 > 0.3 * 0.5); node 4 is a leaf: the bonus sample from p_4.
TEST(TreeAcceptanceTest, TypicalTakesTheLongestPassingPathThenTheLikelierOne) {
  const Dense root = {0.5f, 0.3f, 0.15f, 0.05f};
  const Dense half_at_0 = {0.5f, 0.2f, 0.2f, 0.1f};
  const Dense u(4, 0.25f);
  const Dense p_4 = {0.1f, 0.2f, 0.3f, 0.4f};
  TreeCase c{{-1, -1, -1, 1, 2, 0, 5},
             {Propose(3), Propose(1), Propose(0), Propose(0), Propose(0), Propose(0), Propose(0)},
             Targets({root, half_at_0, half_at_0, half_at_0, u, p_4, half_at_0, half_at_0})};
  for (uint64_t index = 0; index < 20; ++index) {
    const TreeAcceptanceResult r = RunOk(c, AcceptanceRule::kTypical, {2, index, 0});
    EXPECT_THAT(r.path, ElementsAre(2, 4));
    EXPECT_THAT(r.committed, ElementsAre(0, 0, ResampleAt(p_4, 2, index + 2)));
  }
  // A failing child under node 4 (token 3 at p_4(3) = 0.05) makes node 4's step a
  // refusal: the correction is argmax p_4.
  const Dense p_4_low = {0.05f, 0.6f, 0.3f, 0.05f};
  c.parents.push_back(4);
  c.nodes.push_back(Propose(3));
  c.targets = Targets({root, half_at_0, half_at_0, half_at_0, u, p_4_low, half_at_0, half_at_0, u});
  EXPECT_THAT(RunOk(c, AcceptanceRule::kTypical).committed, ElementsAre(0, 0, 1));
  // Equal likelihoods (tokens 1 and 0 both at 0.3 under p_root): the lower last index
  // (node 3) wins.
  const Dense root_tie = {0.3f, 0.3f, 0.35f, 0.05f};
  c.targets =
      Targets({root_tie, half_at_0, half_at_0, half_at_0, u, p_4_low, half_at_0, half_at_0, u});
  EXPECT_THAT(RunOk(c, AcceptanceRule::kTypical).path, ElementsAre(1, 3));
}

// The position rule on a tree uses K = the tree's depth D: node 0 (depth 1, p 0.8) would
// pass with K = 1 (theta 0.70) but not with D = 2 (theta 0.825); the correction is the
// kResample sample from p_root.
TEST(TreeAcceptanceTest, PositionThresholdsUseTheTreeDepth) {
  const Dense root = {0.8f, 0.1f, 0.1f};
  const Dense flat(3, 1.0f / 3);
  const TreeCase c{
      {-1, -1, 1}, {Propose(0), Propose(1), Propose(2)}, Targets({root, flat, flat, flat})};
  for (uint64_t index = 0; index < 20; ++index) {
    const TreeAcceptanceResult r = RunOk(c, AcceptanceRule::kPosition, {5, index, 0});
    EXPECT_TRUE(r.path.empty());
    EXPECT_THAT(r.committed, ElementsAre(ResampleAt(root, 5, index)));
  }
  EXPECT_THAT(RunOk({{-1}, {Propose(0)}, Targets({root, flat})}, AcceptanceRule::kPosition).path,
              ElementsAre(0));
}

// ---------------------------------------------------------------- chains

// On a chain every rule gives AcceptProposals' result bit for bit, errors included.
TEST(TreeAcceptanceTest, ChainsGiveExactlyAcceptProposalsResultForEveryRule) {
  std::mt19937 gen(1234);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (AcceptanceRule rule :
       {AcceptanceRule::kGreedy, AcceptanceRule::kRejection, AcceptanceRule::kThreshold,
        AcceptanceRule::kRatio, AcceptanceRule::kPosition, AcceptanceRule::kTypical,
        AcceptanceRule::kCoupled}) {
    int accepted = 0, errors = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      const int vocab = 2 + static_cast<int>(gen() % 11), k = static_cast<int>(gen() % 7);
      const RandomKey key{gen() % 1000, gen() % 1000, gen() % 1000};
      std::vector<Dense> dists;
      for (int i = 0; i <= k; ++i) {
        dists.push_back(RandomDistribution(&gen, vocab, static_cast<int>(gen() % 3),
                                           static_cast<float>(8.0 * unit(gen))));
        if (gen() % 10 == 0) dists.back() = WithMassAt(vocab, gen() % vocab, 1.0f);  // One-hot.
        if (gen() % 200 == 0) dists.back().assign(vocab, 0.0f);                      // No mass.
      }
      std::vector<Proposal> chain;
      std::vector<int32_t> parents;
      for (int i = 0; i < k; ++i) {
        Proposal node;
        node.q = TopKSparse(RandomDistribution(&gen, vocab, 0, 2.0f), 1 + gen() % vocab);
        const int choice = static_cast<int>(gen() % 3);
        node.token = choice == 0   ? SampleFromSparse(node.q, unit(gen))
                     : choice == 1 ? Argmax(dists[i])
                                   : GumbelSample(dists[i], key.seed, key.position + i);
        if (node.token < 0) node.token = 0;
        if (!(ProbabilityOf(node.q, node.token) > 0.0f)) node.q = PointMass(node.token);
        chain.push_back(node);
        parents.push_back(i - 1);
      }
      const Targets targets(dists);
      absl::StatusOr<AcceptanceResult> want =
          AcceptProposals(chain, targets.spans, Rule(rule), key);
      absl::StatusOr<TreeAcceptanceResult> got =
          AcceptTree(parents, chain, targets.spans, Rule(rule), key);
      ASSERT_EQ(want.ok(), got.ok()) << want.status() << " vs " << got.status();
      if (!want.ok()) {
        EXPECT_EQ(want.status().code(), got.status().code());
        ++errors;
        continue;
      }
      ASSERT_EQ(got->committed, want->committed) << AcceptanceRuleName(rule) << " trial " << trial;
      ASSERT_EQ(got->num_accepted, want->num_accepted);
      for (int i = 0; i < got->num_accepted; ++i) EXPECT_EQ(got->path[i], i);
      accepted += want->num_accepted;
    }
    EXPECT_GT(accepted, 300) << AcceptanceRuleName(rule);
    EXPECT_GT(errors, 0) << AcceptanceRuleName(rule);
  }
}

}  // namespace
}  // namespace spec
}  // namespace tandem
