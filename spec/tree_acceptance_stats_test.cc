// The lossless tree rules (spec/tree_acceptance.h) by simulation: over 10^6 steps per
// tree shape, the first committed token is distributed as the target's p_1 and the first
// two generated tokens as p_1(y) p_2(z | y), for recursive rejection sampling (siblings
// drawn without replacement from a draft q != p) and for the coupled rule. A tree whose
// tokens were not drawn from their q is caught by the same measure. (Hand-made cases and
// chain equality with AcceptProposals: tree_acceptance_test.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "spec/acceptance_test_util.h"
#include "spec/rng.h"
#include "spec/sampling.h"
#include "spec/tree_acceptance.h"

namespace tandem {
namespace spec {
namespace {

using testing::Dense;
using testing::RandomDistribution;
using testing::Rule;

constexpr int kVocab = 8;
constexpr int kTrials = 1000000;
// Total variation of an empirical distribution over C cells from its truth has mean
// about sum_c sqrt(p_c (1 - p_c) / (2 pi N)) <= sqrt(C / (2 pi N)): <= 0.0011 for the 8
// first tokens and <= 0.0032 for the 64 pairs at N = 10^6 (printed per case), with a
// standard deviation of a few 10^-4. A biased rule shows up above 0.005.
constexpr double kMaxTotalVariation = 0.005;

// A two-token target "model" and a draft that disagrees with it: p_1, p_2(. | y) and
// p_3 (every depth-2 row; it only feeds bonus tokens), q_1 and q_2(. | y) sparse.
struct Model {
  Dense p1, p3;
  std::vector<Dense> p2;
  SparseDistribution q1;
  std::vector<SparseDistribution> q2;
};

Model MakeModel(uint32_t seed) {
  std::mt19937 gen(seed);
  Model m;
  m.p1 = RandomDistribution(&gen, kVocab, 1, 0.0f);
  m.p3 = RandomDistribution(&gen, kVocab, 0, 0.0f);
  // q_1 has 6 tokens (p_1's others only come from residuals), peaked elsewhere than p_1.
  m.q1 = TopKSparse(RandomDistribution(&gen, kVocab, 0, 1.5f), 6);
  for (int y = 0; y < kVocab; ++y) {
    m.p2.push_back(RandomDistribution(&gen, kVocab, y % 3 == 0 ? 1 : 0, 0.0f));
    m.q2.push_back(TopKSparse(RandomDistribution(&gen, kVocab, 0, 1.0f), 5));
  }
  return m;
}

double TotalVariation(const std::vector<int64_t>& counts, const std::vector<double>& truth) {
  double n = 0.0, tv = 0.0;
  for (int64_t c : counts) n += c;
  for (size_t i = 0; i < counts.size(); ++i) tv += std::fabs(counts[i] / n - truth[i]) / 2;
  return tv;
}

constexpr double kPi = 3.14159265358979323846;

double ExpectedNoise(const std::vector<double>& truth, double n) {
  double sum = 0.0;
  for (double p : truth) sum += std::sqrt(p * (1 - p) / (2 * kPi * n));
  return sum;
}

// `width` siblings, each drawn from q without the tokens drawn before it (renormalised),
// which is the q each sends; the draws are keyed by (index, first_draw + j). With
// `top_k_tokens` the tokens are instead q's most likely ones in order (not drawn from
// the q they send: the misuse the rule cannot survive).
std::vector<Proposal> Siblings(const SparseDistribution& q, int width, uint64_t seed,
                               uint64_t index, uint32_t first_draw, bool top_k_tokens) {
  std::vector<Proposal> out;
  SparseDistribution rest = q;
  for (int j = 0; j < width && !rest.ids.empty(); ++j) {
    const double u = UniformDouble(seed, RandomStream::kDraftSample, index, first_draw + j);
    const int32_t token = top_k_tokens ? rest.ids[0] : SampleFromSparse(rest, u);
    out.push_back(Proposal{token, rest});
    const auto at = std::find(rest.ids.begin(), rest.ids.end(), token) - rest.ids.begin();
    const float removed = rest.probs[at];
    rest.ids.erase(rest.ids.begin() + at);
    rest.probs.erase(rest.probs.begin() + at);
    for (float& p : rest.probs) p /= 1.0f - removed;
  }
  return out;
}

struct Shape {
  const char* name;
  int width1, width2;  // Children of the root, and of every first-level node.
};

struct Counts {
  std::vector<int64_t> first = std::vector<int64_t>(kVocab, 0);
  std::vector<int64_t> pairs = std::vector<int64_t>(kVocab * kVocab, 0);
  int64_t accepted = 0;  // Nodes accepted, over all steps.
};

// `trials` steps of `rule` on trees of `shape` drawn from the model's draft; the second
// generated token comes from the same step or, after a one-token step, from the next
// (plain) step at the following index.
void Simulate(const Model& m, const Shape& shape, AcceptanceRule rule, int trials,
              bool top_k_tokens, Counts* out) {
  const AcceptanceParams params = Rule(rule);
  const uint64_t seed = 7;
  Counts& counts = *out;
  std::vector<int32_t> parents;
  std::vector<Proposal> nodes;
  std::vector<absl::Span<const float>> spans;
  for (int t = 0; t < trials; ++t) {
    const uint64_t index = static_cast<uint64_t>(t) * 4;
    nodes = Siblings(m.q1, shape.width1, seed, index, 0, top_k_tokens);
    const size_t first_level = nodes.size();
    parents.assign(first_level, -1);
    spans.assign(1, m.p1);
    for (size_t a = 0; a < first_level; ++a) spans.push_back(m.p2[nodes[a].token]);
    for (size_t a = 0; a < first_level; ++a) {
      for (Proposal& child : Siblings(m.q2[nodes[a].token], shape.width2, seed, index + 1,
                                      16 * static_cast<uint32_t>(a), top_k_tokens)) {
        nodes.push_back(std::move(child));
        parents.push_back(static_cast<int32_t>(a));
        spans.push_back(m.p3);
      }
    }
    absl::StatusOr<TreeAcceptanceResult> r =
        AcceptTree(parents, nodes, spans, params, {seed, index, index});
    ASSERT_TRUE(r.ok()) << r.status();
    const int32_t y = r->committed[0];
    int32_t z = r->committed.size() > 1 ? r->committed[1] : -1;
    if (z < 0) {
      const absl::Span<const float> next[] = {m.p2[y]};
      absl::StatusOr<TreeAcceptanceResult> step =
          AcceptTree({}, {}, next, params, {seed, index + 1, index + 1});
      ASSERT_TRUE(step.ok()) << step.status();
      z = step->committed[0];
    }
    ++counts.first[y];
    ++counts.pairs[y * kVocab + z];
    counts.accepted += r->num_accepted;
  }
}

void ExpectLossless(AcceptanceRule rule) {
  const Model m = MakeModel(11);
  std::vector<double> first(m.p1.begin(), m.p1.end()), pairs;
  for (int y = 0; y < kVocab; ++y) {
    for (int z = 0; z < kVocab; ++z) pairs.push_back(double{m.p1[y]} * m.p2[y][z]);
  }
  std::vector<double> q1_dense(kVocab, 0.0);
  for (size_t j = 0; j < m.q1.ids.size(); ++j) q1_dense[m.q1.ids[j]] = m.q1.probs[j];
  double draft_tv = 0.0;
  for (int x = 0; x < kVocab; ++x) draft_tv += std::fabs(q1_dense[x] - first[x]) / 2;
  ASSERT_GT(draft_tv, 0.2);  // The draft alone is far from the target.
  const Shape shapes[] = {
      {"chain 1-1", 1, 1}, {"2 siblings", 2, 0}, {"4 siblings", 4, 0}, {"2x2", 2, 2}};
  double previous_accepted = 0.0;
  for (const Shape& shape : shapes) {
    Counts c;
    Simulate(m, shape, rule, kTrials, /*top_k_tokens=*/false, &c);
    const double tv_first = TotalVariation(c.first, first);
    const double tv_pairs = TotalVariation(c.pairs, pairs);
    const double accepted = static_cast<double>(c.accepted) / kTrials;
    std::printf(
        "%s %-10s: TV first %.5f (noise ~%.5f), TV pairs %.5f (noise ~%.5f), "
        "accepted/step %.4f\n",
        std::string(AcceptanceRuleName(rule)).c_str(), shape.name, tv_first,
        ExpectedNoise(first, kTrials), tv_pairs, ExpectedNoise(pairs, kTrials), accepted);
    EXPECT_LT(tv_first, kMaxTotalVariation) << shape.name;
    EXPECT_LT(tv_pairs, kMaxTotalVariation) << shape.name;
    if (shape.width2 == 0) {  // One level: wider trees accept more.
      EXPECT_GT(accepted, previous_accepted + 0.02) << shape.name;
      previous_accepted = accepted;
    }
  }
}

TEST(TreeRejectionStatsTest, FirstTwoTokensFollowTheTargetForEveryShape) {
  ExpectLossless(AcceptanceRule::kRejection);
}

TEST(TreeCoupledStatsTest, FirstTwoTokensFollowTheTargetForEveryShape) {
  ExpectLossless(AcceptanceRule::kCoupled);
}

// The same measure catches a tree whose siblings are q's top tokens rather than draws
// from the q they send (a deterministic top-k tree with the draft's q): the test above
// has the power to see a broken rule.
TEST(TreeRejectionStatsTest, TokensNotDrawnFromTheirQAreCaught) {
  const Model m = MakeModel(11);
  constexpr int kFewTrials = 200000;
  Counts c;
  Simulate(m, {"4 siblings", 4, 0}, AcceptanceRule::kRejection, kFewTrials, true, &c);
  const double tv = TotalVariation(c.first, std::vector<double>(m.p1.begin(), m.p1.end()));
  std::printf("rejection, top-k tokens with the draft's q: TV first %.5f\n", tv);
  EXPECT_GT(tv, 4 * kMaxTotalVariation);
}

}  // namespace
}  // namespace spec
}  // namespace tandem
