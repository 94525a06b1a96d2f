// The coupled acceptance rule (spec/acceptance.h): Gumbel-max sampling keyed by
// (seed, absolute position, token) is distributed as the exact processed softmax, and
// speculation with it commits exactly the tokens target-only sampling commits.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec/acceptance.h"
#include "spec/rng.h"
#include "spec/sampling.h"

namespace tandem {
namespace spec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Upper critical value of chi-square with `dof` degrees of freedom at significance
// 1e-6 (one-sided normal quantile 4.753), Wilson-Hilferty approximation.
double ChiSquareCritical1e6(int dof) {
  const double z = 4.753;
  const double a = 2.0 / (9.0 * dof);
  return dof * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// The processed distribution computed from its definition, in double, for logits
// without ties: softmax(logits / temperature), the top_k largest, then the smallest
// most likely set reaching top_p (the crossing token kept), renormalised.
std::vector<double> ExactProcessed(const std::vector<float>& logits, float temperature, int top_k,
                                   float top_p) {
  const size_t n = logits.size();
  std::vector<double> p(n);
  const double max = *std::max_element(logits.begin(), logits.end());
  for (size_t v = 0; v < n; ++v) p[v] = std::exp((logits[v] - max) / temperature);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  if (top_k > 0) {
    for (size_t j = top_k; j < n; ++j) p[order[j]] = 0.0;
  }
  double total = std::accumulate(p.begin(), p.end(), 0.0);
  double kept = 0.0;
  for (size_t j = 0; j < n; ++j) {
    if (kept >= top_p * total) p[order[j]] = 0.0;
    kept += p[order[j]];
  }
  total = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= total;
  return p;
}

TEST(GumbelSampleTest, MatchesTheExactProcessedSoftmaxAtAMillionDraws) {
  const std::vector<float> logits = {2.0f, 1.5f, 1.0f, 0.2f, -0.5f, -1.0f, 0.7f, 1.2f, -2.0f};
  struct Case {
    float temperature;
    int top_k;
    float top_p;
  };
  for (const Case& c : {Case{0.7f, 6, 0.95f}, Case{1.0f, 0, 0.9f}, Case{1.0f, 0, 1.0f}}) {
    SCOPED_TRACE(testing::Message() << "temperature " << c.temperature << " top_k " << c.top_k
                                    << " top_p " << c.top_p);
    const std::vector<double> exact = ExactProcessed(logits, c.temperature, c.top_k, c.top_p);
    std::vector<float> probs;
    ProcessLogits(logits, SamplingConfig{c.temperature, c.top_k, c.top_p}, &probs);
    constexpr int kDraws = 1000000;
    std::vector<int64_t> counts(logits.size(), 0);
    for (int n = 0; n < kDraws; ++n) {
      const int token = GumbelSample(probs, 77, 1000 + n);
      ASSERT_GE(token, 0);
      ++counts[token];
    }
    double chi = 0.0, tv = 0.0;
    int support = 0;
    for (size_t v = 0; v < logits.size(); ++v) {
      if (exact[v] == 0.0) {
        EXPECT_EQ(counts[v], 0) << "token " << v << " is outside the support";
        continue;
      }
      ++support;
      const double expected = exact[v] * kDraws;
      chi += (counts[v] - expected) * (counts[v] - expected) / expected;
      tv += 0.5 * std::fabs(counts[v] / double(kDraws) - exact[v]);
    }
    ASSERT_GE(support, 4);
    EXPECT_LT(chi, ChiSquareCritical1e6(support - 1));
    EXPECT_LT(tv, 0.003);
  }
}

TEST(GumbelSampleTest, SupportTiesAndEmptyRows) {
  EXPECT_EQ(GumbelSample(std::vector<float>{0.0f, 0.0f}, 1, 2), -1);
  EXPECT_EQ(GumbelSample(std::vector<float>{}, 1, 2), -1);
  const float nan = std::nanf("");
  for (uint64_t position = 0; position < 200; ++position) {
    EXPECT_EQ(GumbelSample(std::vector<float>{0.0f, 1.0f, nan, 0.0f}, 5, position), 1);
    const int token = GumbelSample(std::vector<float>{0.5f, 0.0f, 0.5f, -1.0f}, 5, position);
    EXPECT_TRUE(token == 0 || token == 2) << token;
  }
  // The score is ln p + GumbelNoise.
  const std::vector<float> p = {0.2f, 0.3f, 0.5f};
  int best = 0;
  for (int v = 1; v < 3; ++v) {
    if (std::log(double(p[v])) + GumbelNoise(9, 4, v) >
        std::log(double(p[best])) + GumbelNoise(9, 4, best)) {
      best = v;
    }
  }
  EXPECT_EQ(GumbelSample(p, 9, 4), best);
}

AcceptanceParams Coupled() {
  AcceptanceParams params;
  params.rule = AcceptanceRule::kCoupled;
  return params;
}

std::vector<absl::Span<const float>> Spans(const std::vector<std::vector<float>>& dists) {
  return std::vector<absl::Span<const float>>(dists.begin(), dists.end());
}

TEST(CoupledRuleTest, AcceptsExactlyTheTargetsGumbelToken) {
  const std::vector<std::vector<float>> p = {
      {0.1f, 0.2f, 0.3f, 0.4f}, {0.25f, 0.25f, 0.25f, 0.25f}, {0.7f, 0.1f, 0.1f, 0.1f}};
  int rejected = 0;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const RandomKey key{seed, 3, 40};
    const int t1 = GumbelSample(p[0], seed, 40), t2 = GumbelSample(p[1], seed, 41);
    const int bonus = GumbelSample(p[2], seed, 42);
    // Both proposals right: accepted, then the Gumbel bonus at position + K.
    absl::StatusOr<AcceptanceResult> all =
        AcceptProposals({Proposal{t1, {}}, Proposal{t2, {}}}, Spans(p), Coupled(), key);
    ASSERT_TRUE(all.ok()) << all.status();
    EXPECT_THAT(all->committed, ElementsAre(t1, t2, bonus));
    EXPECT_EQ(all->num_accepted, 2);
    // A wrong first proposal: rejected, t1 emitted in its place.
    const int wrong = (t1 + 1) % 4;
    absl::StatusOr<AcceptanceResult> first =
        AcceptProposals({Proposal{wrong, {}}, Proposal{t2, {}}}, Spans(p), Coupled(), key);
    ASSERT_TRUE(first.ok());
    EXPECT_THAT(first->committed, ElementsAre(t1));
    EXPECT_EQ(first->num_accepted, 0);
    // A wrong second proposal: the first is kept, t2 follows.
    absl::StatusOr<AcceptanceResult> second =
        AcceptProposals({Proposal{t1, {}}, Proposal{(t2 + 3) % 4, {}}}, Spans(p), Coupled(), key);
    ASSERT_TRUE(second.ok());
    EXPECT_THAT(second->committed, ElementsAre(t1, t2));
    rejected += first->num_accepted == 0;
  }
  EXPECT_EQ(rejected, 50);
}

TEST(CoupledRuleTest, KeyedByAbsolutePositionNotSampleIndex) {
  const std::vector<std::vector<float>> p = {{0.25f, 0.25f, 0.25f, 0.25f}};
  int changed_with_position = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    const auto run = [&](RandomKey key) {
      absl::StatusOr<AcceptanceResult> result = AcceptProposals({}, Spans(p), Coupled(), key);
      EXPECT_TRUE(result.ok());
      return result.ok() ? result->committed[0] : -1;
    };
    const int base = run({seed, 0, 10});
    EXPECT_EQ(base, GumbelSample(p[0], seed, 10));  // K = 0 is plain Gumbel sampling.
    EXPECT_EQ(run({seed, 123, 10}), base);
    changed_with_position += run({seed, 0, 11}) != base;
  }
  EXPECT_GT(changed_with_position, 20);
}

TEST(CoupledRuleTest, NeverEmitsOutsideTheSupportAndFailsWithoutMass) {
  const std::vector<std::vector<float>> p = {{0.0f, 0.6f, 0.0f, 0.4f}, {0.0f, 0.0f, 1.0f, 0.0f}};
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    absl::StatusOr<AcceptanceResult> result =
        AcceptProposals({Proposal{0, {}}}, Spans(p), Coupled(), {seed, 0, 7});
    ASSERT_TRUE(result.ok());
    ASSERT_EQ(result->committed.size(), 1u);
    EXPECT_NE(result->committed[0], 0);  // Proposal 0 has p = 0: never accepted.
    EXPECT_NE(result->committed[0], 2);
  }
  const std::vector<std::vector<float>> empty = {{0.0f, 0.0f}, {0.5f, 0.5f}};
  absl::StatusOr<AcceptanceResult> failed =
      AcceptProposals({Proposal{1, {}}}, Spans(empty), Coupled(), {1, 0, 0});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("no positive probability"));
}

TEST(CoupledRuleTest, OneHotTargetsActAsGreedy) {
  const std::vector<float> logits = {0.3f, 2.5f, -1.0f, 2.4f};
  std::vector<float> one_hot;
  ProcessLogits(logits, SamplingConfig{0.0f, 0, 1.0f}, &one_hot);
  const std::vector<std::vector<float>> p = {one_hot, one_hot};
  AcceptanceParams greedy;
  greedy.rule = AcceptanceRule::kGreedy;
  for (int proposal = 0; proposal < 4; ++proposal) {
    absl::StatusOr<AcceptanceResult> coupled =
        AcceptProposals({Proposal{proposal, {}}}, Spans(p), Coupled(), {3, 0, 5});
    absl::StatusOr<AcceptanceResult> argmax =
        AcceptProposals({Proposal{proposal, PointMass(proposal)}}, Spans(p), greedy, {3, 0, 5});
    ASSERT_TRUE(coupled.ok() && argmax.ok());
    EXPECT_EQ(coupled->committed, argmax->committed);
  }
}

// Random processed distributions over a small vocabulary.
std::vector<float> RandomProcessed(std::mt19937_64& rng, int vocab, const SamplingConfig& config) {
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(vocab), probs;
  for (float& x : logits) x = normal(rng);
  ProcessLogits(logits, config, &probs);
  return probs;
}

// Speculation with the draft's Gumbel-max proposals commits, position after position,
// exactly the tokens target-only Gumbel sampling draws.
TEST(CoupledRuleTest, SpeculationCommitsTheTargetOnlyTokensForEveryK) {
  std::mt19937_64 rng(11);
  constexpr int kVocab = 12;
  const SamplingConfig configs[] = {{0.7f, 8, 0.9f}, {1.0f, 0, 0.95f}, {1.0f, 0, 1.0f}};
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const SamplingConfig& config = configs[trial % 3];
    const int k = 1 + trial % 8;
    const uint64_t seed = rng(), position = rng() % 4096;
    std::vector<std::vector<float>> p;
    for (int i = 0; i <= k; ++i) p.push_back(RandomProcessed(rng, kVocab, config));
    std::vector<Proposal> proposals;
    std::normal_distribution<float> jitter(0.0f, 0.3f);
    for (int i = 0; i < k; ++i) {
      std::vector<float> q = p[i];
      for (float& x : q) x = x > 0.0f ? x * std::exp(jitter(rng)) : 0.0f;
      proposals.push_back(Proposal{GumbelSample(q, seed, position + i), {}});
    }
    absl::StatusOr<AcceptanceResult> result =
        AcceptProposals(proposals, Spans(p), Coupled(), {seed, 0, position});
    ASSERT_TRUE(result.ok()) << result.status();
    for (size_t i = 0; i < result->committed.size(); ++i) {
      ASSERT_EQ(result->committed[i], GumbelSample(p[i], seed, position + i))
          << "trial " << trial << " position " << i;
    }
    accepted += result->num_accepted;
    rejected += result->num_accepted < k;
  }
  EXPECT_GT(accepted, 3000);  // Both outcomes occur often.
  EXPECT_GT(rejected, 300);
}

// P(accept) = P(argmax(ln p + g) = argmax(ln q + g)) = sum_v 1 / sum_u max(p_u / p_v,
// q_u / q_v) (token v wins both argmaxes iff g_u < g_v + ln min(p_v / p_u, q_v / q_u) for
// every u), at most 1 - TV(p, q), the rejection rule's rate.
TEST(CoupledRuleTest, AcceptanceRateIsTheGumbelCouplingProbability) {
  const std::vector<float> p = {0.4f, 0.25f, 0.15f, 0.1f, 0.06f, 0.04f};
  const std::vector<float> q = {0.2f, 0.35f, 0.2f, 0.05f, 0.1f, 0.1f};
  double tv = 0.0, exact = 0.0;
  for (size_t v = 0; v < p.size(); ++v) {
    tv += 0.5 * std::fabs(p[v] - q[v]);
    double weights = 0.0;
    for (size_t u = 0; u < p.size(); ++u) weights += std::max(p[u] / p[v], q[u] / q[v]);
    exact += 1.0 / weights;
  }
  ASSERT_LT(exact, 1.0 - tv);
  constexpr int kDraws = 200000;
  int same = 0;
  for (int n = 0; n < kDraws; ++n) same += GumbelSample(p, 5, n) == GumbelSample(q, 5, n);
  const double rate = double(same) / kDraws;
  EXPECT_NEAR(rate, exact, 5 * std::sqrt(exact * (1 - exact) / kDraws));
}

}  // namespace
}  // namespace spec
}  // namespace tandem
