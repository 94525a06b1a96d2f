#include "spec/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec/rng.h"

namespace tandem {
namespace spec {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::Pointwise;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Process(const std::vector<float>& logits, float temperature, int top_k = 0,
                           float top_p = 1.0f) {
  std::vector<float> probs;
  ProcessLogits(logits, SamplingConfig{temperature, top_k, top_p}, &probs);
  return probs;
}

// Logits whose softmax at temperature 1 is `probs` (up to float rounding).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// Naive reference: long-double softmax, a full sort, top-k then top-p, renormalise.
std::vector<double> ReferenceProcess(const std::vector<float>& logits, double temperature,
                                     int top_k, double top_p) {
  const size_t n = logits.size();
  long double max_logit = logits[0];
  for (float x : logits) max_logit = std::max<long double>(max_logit, x);
  std::vector<long double> w(n);
  long double total = 0;
  for (size_t i = 0; i < n; ++i) {
    w[i] = std::exp((logits[i] - max_logit) / temperature);
    total += w[i];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return w[a] != w[b] ? w[a] > w[b] : a < b; });
  size_t keep = (top_k > 0 && static_cast<size_t>(top_k) < n) ? top_k : n;
  long double kept_total = 0;
  for (size_t j = 0; j < keep; ++j) kept_total += w[order[j]];
  if (top_p < 1.0) {
    long double cumulative = 0;
    size_t j = 0;
    while (j < keep) {
      cumulative += w[order[j++]] / kept_total;
      if (cumulative >= top_p) break;
    }
    keep = j;
  }
  long double final_total = 0;
  for (size_t j = 0; j < keep; ++j) final_total += w[order[j]];
  std::vector<double> result(n, 0.0);
  for (size_t j = 0; j < keep; ++j) result[order[j]] = w[order[j]] / final_total;
  return result;
}

TEST(ValidateSamplingConfigTest, AcceptsRangesAndNamesBadFields) {
  EXPECT_TRUE(ValidateSamplingConfig({0.0f, 0, 1.0f}, 10).ok());
  EXPECT_TRUE(ValidateSamplingConfig({100.0f, 10, 0.01f}, 10).ok());
  const auto expect_bad = [](SamplingConfig c, int vocab, const char* field) {
    const absl::Status s = ValidateSamplingConfig(c, vocab);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(field));
  };
  expect_bad({-0.1f, 0, 1.0f}, 10, "temperature");
  expect_bad({100.5f, 0, 1.0f}, 10, "temperature");
  expect_bad({kNaN, 0, 1.0f}, 10, "temperature");
  expect_bad({1.0f, -1, 1.0f}, 10, "top_k");
  expect_bad({1.0f, 11, 1.0f}, 10, "top_k");
  expect_bad({1.0f, 0, 0.0f}, 10, "top_p");
  expect_bad({1.0f, 0, 1.01f}, 10, "top_p");
  expect_bad({1.0f, 0, kNaN}, 10, "top_p");
  expect_bad({1.0f, 0, 1.0f}, 0, "vocab_size");
}

TEST(ArgmaxTest, LowestIndexWinsTiesAndNaNIsSkipped) {
  EXPECT_EQ(Argmax(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(Argmax(std::vector<float>{kNaN, 1, kNaN, 5, 5}), 3);
  EXPECT_EQ(Argmax(std::vector<float>{kNaN, -kInf, -kInf}), 1);
  EXPECT_EQ(Argmax(std::vector<float>{2, kInf, kNaN}), 1);
  EXPECT_EQ(Argmax(std::vector<float>{kNaN, kNaN}), -1);
  EXPECT_EQ(Argmax(std::vector<float>{}), -1);
}

TEST(ProcessLogitsTest, GreedyIsOneHotAtArgmaxWhateverTheFilters) {
  EXPECT_THAT(Process({1, 3, 3, 2}, 0.0f), ElementsAre(0, 1, 0, 0));
  EXPECT_THAT(Process({1, 3, 3, 2}, 0.0f, 1, 0.1f), ElementsAre(0, 1, 0, 0));
  EXPECT_THAT(Process({1, 3, 3, 2}, -1.0f), ElementsAre(0, 1, 0, 0));
  EXPECT_THAT(Process({1, 3, 3, 2}, kNaN), ElementsAre(0, 1, 0, 0));
  EXPECT_TRUE(Process({}, 1.0f).empty());
}

TEST(ProcessLogitsTest, TemperatureSoftmaxByHand) {
  // exp(0), exp(ln 2), exp(ln 3) -> 1/6, 2/6, 3/6.
  EXPECT_THAT(Process(LogitsOf({1, 2, 3}), 1.0f),
              Pointwise(FloatNear(1e-6), std::vector<float>{1 / 6.f, 2 / 6.f, 3 / 6.f}));
  // Temperature 2 halves the logits: weights 1 and 2 -> 1/3, 2/3.
  const float two_ln2 = static_cast<float>(2 * std::log(2.0));
  EXPECT_THAT(Process({0.0f, two_ln2}, 2.0f),
              Pointwise(FloatNear(1e-6), std::vector<float>{1 / 3.f, 2 / 3.f}));
  // Huge logits do not overflow (max subtraction); equal logits are exactly uniform.
  EXPECT_THAT(Process({1e30f, 1e30f, 1e30f, 1e30f}, 0.5f), ElementsAre(0.25, 0.25, 0.25, 0.25));
  EXPECT_THAT(Process({1000.0f, 0.0f}, 1.0f), ElementsAre(1.0f, 0.0f));
}

TEST(ProcessLogitsTest, TopKKeepsTheMostLikelyWithTiesToLowerIndex) {
  EXPECT_THAT(Process(LogitsOf({1, 2, 3}), 1.0f, 2),
              Pointwise(FloatNear(1e-6), std::vector<float>{0, 2 / 5.f, 3 / 5.f}));
  EXPECT_THAT(Process({1, 2, 2, 2, 0}, 1.0f, 2), ElementsAre(0, 0.5, 0.5, 0, 0));
  EXPECT_THAT(Process({1, 2, 2, 2, 0}, 1.0f, 1), ElementsAre(0, 1, 0, 0, 0));
  // top_k >= vocab is off.
  EXPECT_THAT(Process({5, 5}, 1.0f, 7), ElementsAre(0.5, 0.5));
}

TEST(ProcessLogitsTest, TopPKeepsSmallestSetReachingTheMass) {
  const std::vector<float> logits = LogitsOf({0.1, 0.2, 0.3, 0.4});
  // 0.4 < 0.5, 0.4 + 0.3 >= 0.5: the crossing token is included.
  EXPECT_THAT(Process(logits, 1.0f, 0, 0.5f),
              Pointwise(FloatNear(1e-6), std::vector<float>{0, 0, 3 / 7.f, 4 / 7.f}));
  EXPECT_THAT(Process(logits, 1.0f, 0, 0.35f), ElementsAre(0, 0, 0, 1));
  EXPECT_THAT(Process(logits, 1.0f, 0, 0.75f),
              Pointwise(FloatNear(1e-6), std::vector<float>{0, 2 / 9.f, 3 / 9.f, 4 / 9.f}));
  // Exact boundary: four equal tokens, mass 0.5 reached by exactly two of them.
  EXPECT_THAT(Process({5, 5, 5, 5}, 1.0f, 0, 0.5f), ElementsAre(0.5, 0.5, 0, 0));
  EXPECT_THAT(Process({5, 5, 5, 5}, 1.0f, 0, 0.5000001f),
              Pointwise(FloatNear(1e-6), std::vector<float>{1 / 3.f, 1 / 3.f, 1 / 3.f, 0}));
  // top_p <= 0 keeps only the most likely token.
  EXPECT_THAT(Process(logits, 1.0f, 0, 0.0f), ElementsAre(0, 0, 0, 1));
}

TEST(ProcessLogitsTest, TopKRunsBeforeTopPOnTheRenormalisedMass) {
  // After top-k = 2 the masses are 3/7 and 4/7; 4/7 >= 0.5 keeps one token.
  // (Applying top-p to the original masses would keep two.)
  EXPECT_THAT(Process(LogitsOf({0.1, 0.2, 0.3, 0.4}), 1.0f, 2, 0.5f), ElementsAre(0, 0, 0, 1));
}

TEST(ProcessLogitsTest, NonFiniteLogitsNeverCrash) {
  EXPECT_THAT(Process({kNaN, 0.0f, kNaN, 0.0f}, 1.0f), ElementsAre(0, 0.5, 0, 0.5));
  EXPECT_THAT(Process({kInf, 3.0f, kInf, kNaN}, 1.0f), ElementsAre(0.5, 0, 0.5, 0));
  EXPECT_THAT(Process({-kInf, -kInf}, 1.0f), ElementsAre(1, 0));
  EXPECT_THAT(Process({-kInf, 2.0f}, 1.0f), ElementsAre(0, 1));
  EXPECT_THAT(Process({kNaN, kNaN}, 1.0f), ElementsAre(0, 0));
  EXPECT_THAT(Process({kNaN, kNaN}, 0.0f), ElementsAre(0, 0));
  EXPECT_THAT(Process({1, 2}, kInf), ElementsAre(0.5, 0.5));
}

TEST(ProcessLogitsTest, MatchesNaiveReferenceOnLargeRandomVocabularies) {
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  struct Case {
    int vocab;
    float temperature;
    int top_k;
    float top_p;
  };
  const Case cases[] = {{1000, 1.0f, 0, 1.0f},   {50000, 0.7f, 0, 0.9f},   {50000, 5.0f, 0, 0.95f},
                        {32000, 1.0f, 40, 0.8f}, {32000, 1.3f, 500, 1.0f}, {200, 0.2f, 0, 0.3f}};
  for (const Case& c : cases) {
    std::vector<float> logits(c.vocab);
    for (float& x : logits) x = normal(gen);
    const std::vector<float> got = Process(logits, c.temperature, c.top_k, c.top_p);
    const std::vector<double> want = ReferenceProcess(logits, c.temperature, c.top_k, c.top_p);
    ASSERT_EQ(got.size(), want.size());
    double sum = 0.0;
    int support_mismatch = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      sum += got[i];
      if ((got[i] > 0) != (want[i] > 0)) ++support_mismatch;
      EXPECT_NEAR(got[i], want[i], 1e-6 * want[i] + 1e-12) << "token " << i;
    }
    EXPECT_EQ(support_mismatch, 0) << "vocab " << c.vocab;
    EXPECT_NEAR(sum, 1.0, 1e-4);
  }
}

TEST(SampleFromProbsTest, InverseCdfInIndexOrder) {
  const std::vector<float> probs = {0.25f, 0.0f, 0.5f, 0.25f};
  EXPECT_EQ(SampleFromProbs(probs, 0.0), 0);
  EXPECT_EQ(SampleFromProbs(probs, 0.2499), 0);
  EXPECT_EQ(SampleFromProbs(probs, 0.25), 2);  // Skips the zero-probability token 1.
  EXPECT_EQ(SampleFromProbs(probs, 0.7499), 2);
  EXPECT_EQ(SampleFromProbs(probs, 0.75), 3);
  EXPECT_EQ(SampleFromProbs(probs, 1.0 - std::ldexp(1.0, -53)), 3);
  // Out-of-range u is clamped.
  EXPECT_EQ(SampleFromProbs(probs, 1.0), 3);
  EXPECT_EQ(SampleFromProbs(probs, 7.0), 3);
  EXPECT_EQ(SampleFromProbs(probs, -0.5), 0);
  EXPECT_EQ(SampleFromProbs(probs, std::nan("")), 0);
  // Double overload behaves the same.
  const std::vector<double> weights = {0.25, 0.0, 0.5, 0.25};
  EXPECT_EQ(SampleFromProbs(weights, 0.25), 2);
  EXPECT_EQ(SampleFromProbs(weights, 0.75), 3);
}

TEST(SampleFromProbsTest, NeverReturnsAZeroProbabilityToken) {
  const double almost_one = 1.0 - std::ldexp(1.0, -53);
  EXPECT_EQ(SampleFromProbs(std::vector<float>{0.5f, 0.5f, 0.0f, 0.0f}, almost_one), 1);
  EXPECT_EQ(SampleFromProbs(std::vector<float>{0.0f, 0.0f, 1.0f}, 0.0), 2);
  // Weights whose float sum is not 1 (rounding), with u as close to 1 as possible.
  EXPECT_EQ(SampleFromProbs(std::vector<float>{0.3f, 0.3f, 0.3f, 0.0f}, almost_one), 2);
  // Huge dynamic range: the trailing zero-weight token is never chosen.
  EXPECT_EQ(SampleFromProbs(std::vector<double>{1e300, 1e-300, 0.0}, almost_one), 0);
  EXPECT_EQ(SampleFromProbs(std::vector<double>{0.0, 1e-300, 0.0}, almost_one), 1);
  // Negative and non-finite weights count as zero.
  const std::vector<float> odd = {-1.0f, kNaN, kInf, 2.0f, -kInf};
  for (double u : {0.0, 0.3, 0.9999}) EXPECT_EQ(SampleFromProbs(odd, u), 3);
  EXPECT_EQ(SampleFromProbs(std::vector<float>{0.0f, 0.0f}, 0.5), -1);
  EXPECT_EQ(SampleFromProbs(std::vector<float>{}, 0.5), -1);
}

TEST(SampleFromProbsTest, FrequenciesMatchTheDistribution) {
  const std::vector<float> probs = {0.05f, 0.0f, 0.15f, 0.3f, 0.5f};
  constexpr int kDraws = 200000;
  std::vector<int> counts(probs.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    ++counts[SampleFromProbs(probs, UniformDouble(5, RandomStream::kResample, i))];
  }
  EXPECT_EQ(counts[1], 0);
  for (size_t i = 0; i < probs.size(); ++i) {
    const double sd = std::sqrt(probs[i] * (1 - probs[i]) / kDraws);
    EXPECT_NEAR(static_cast<double>(counts[i]) / kDraws, probs[i], 6 * sd + 1e-12) << i;
  }
}

TEST(TopKSparseTest, KeepsTheMostLikelyPositiveTokensRenormalised) {
  const std::vector<float> probs = {0.1f, 0.4f, 0.2f, 0.2f, 0.1f, 0.0f};
  SparseDistribution top3 = TopKSparse(probs, 3);
  EXPECT_THAT(top3.ids, ElementsAre(1, 2, 3));
  EXPECT_THAT(top3.probs, Pointwise(FloatNear(1e-7), std::vector<float>{0.5f, 0.25f, 0.25f}));
  // Ties at the cut go to the lower id.
  SparseDistribution top4 = TopKSparse(probs, 4);
  EXPECT_THAT(top4.ids, ElementsAre(1, 2, 3, 0));
  EXPECT_THAT(top4.probs,
              Pointwise(FloatNear(1e-7), std::vector<float>{4 / 9.f, 2 / 9.f, 2 / 9.f, 1 / 9.f}));
  // k beyond the support: zero-probability tokens are left out.
  SparseDistribution all = TopKSparse(probs, 100);
  EXPECT_THAT(all.ids, ElementsAre(1, 2, 3, 0, 4));
  EXPECT_NEAR(std::accumulate(all.probs.begin(), all.probs.end(), 0.0), 1.0, 1e-6);
  EXPECT_TRUE(TopKSparse(probs, 0).ids.empty());
  EXPECT_TRUE(TopKSparse(std::vector<float>{0.0f, kNaN}, 3).ids.empty());
}

TEST(SparseDistributionTest, WithoutRemovesATokenAndRenormalises) {
  SparseDistribution q;
  q.ids = {3, 7, 9};
  q.probs = {0.5f, 0.3f, 0.2f};
  const SparseDistribution w = SparseWithout(q, 3);
  EXPECT_EQ(w.ids, (std::vector<int32_t>{7, 9}));
  ASSERT_EQ(w.probs.size(), 2u);
  EXPECT_FLOAT_EQ(w.probs[0], 0.6f);
  EXPECT_FLOAT_EQ(w.probs[1], 0.4f);
  EXPECT_EQ(SparseWithout(q, 5).ids, q.ids);  // Absent token: q itself.
  EXPECT_TRUE(SparseWithout(PointMass(4), 4).ids.empty());
}

TEST(SparseDistributionTest, ProbabilityOfPointMassAndSampling) {
  const SparseDistribution dist{{7, 2, 9}, {0.5f, 0.25f, 0.25f}};
  EXPECT_EQ(ProbabilityOf(dist, 2), 0.25f);
  EXPECT_EQ(ProbabilityOf(dist, 7), 0.5f);
  EXPECT_EQ(ProbabilityOf(dist, 3), 0.0f);
  EXPECT_EQ(SampleFromSparse(dist, 0.1), 7);
  EXPECT_EQ(SampleFromSparse(dist, 0.6), 2);
  EXPECT_EQ(SampleFromSparse(dist, 0.9), 9);
  EXPECT_EQ(SampleFromSparse(SparseDistribution{}, 0.5), -1);
  const SparseDistribution point = PointMass(42);
  EXPECT_THAT(point.ids, ElementsAre(42));
  EXPECT_THAT(point.probs, ElementsAre(1.0f));
  EXPECT_EQ(SampleFromSparse(point, 0.999), 42);
}

TEST(EntropyTest, HandComputedValues) {
  EXPECT_NEAR(Entropy(std::vector<float>{0.25f, 0.25f, 0.25f, 0.25f}), std::log(4.0), 1e-12);
  EXPECT_NEAR(Entropy(std::vector<float>{0.5f, 0.5f, 0.0f}), std::log(2.0), 1e-12);
  EXPECT_EQ(Entropy(std::vector<float>{0.0f, 1.0f, 0.0f}), 0.0);
  // -(0.1 ln 0.1 + 0.9 ln 0.9) with the float values of 0.1 and 0.9.
  const double a = 0.1f, b = 0.9f;
  EXPECT_NEAR(Entropy(std::vector<float>{0.1f, 0.9f}), -(a * std::log(a) + b * std::log(b)), 1e-15);
}

}  // namespace
}  // namespace spec
}  // namespace tandem
