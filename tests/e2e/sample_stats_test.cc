#include "tests/e2e/sample_stats.h"

#include <gtest/gtest.h>

#include <random>

namespace tandem::e2e {
namespace {

TEST(SampleStatsTest, QuantilesMatchTables) {
  // Tabulated chi-square quantiles.
  EXPECT_NEAR(ChiSquareQuantile(5, 0.05), 11.07, 0.1);
  EXPECT_NEAR(ChiSquareQuantile(10, 0.001), 29.59, 0.3);
  EXPECT_NEAR(ChiSquareQuantile(30, 0.001), 59.70, 0.6);
  EXPECT_NEAR(ChiSquareSurvival(10, 29.59), 0.001, 0.0002);
}

// Draws `n` outcomes of `dist` (single-token outcomes 0..size-1).
Counts Draw(const std::vector<double>& dist, int n, std::mt19937_64& rng) {
  std::discrete_distribution<int> pick(dist.begin(), dist.end());
  Counts counts;
  for (int i = 0; i < n; ++i) counts[{pick(rng)}] += 1;
  return counts;
}

Probabilities Reference(const std::vector<double>& dist) {
  Probabilities p;
  for (int i = 0; i < static_cast<int>(dist.size()); ++i) p[{i}] = dist[i];
  return p;
}

// A shape like the end-to-end windows': a few likely outcomes and a tail.
const std::vector<double> kShape = {0.30, 0.20, 0.12, 0.08, 0.06, 0.05, 0.04,  0.03,
                                    0.03, 0.02, 0.02, 0.02, 0.01, 0.01, 0.005, 0.005};

double RejectionRate(const std::vector<double>& truth, const Probabilities& reference, int n,
                     double alpha, int trials) {
  std::mt19937_64 rng(42);
  int rejected = 0;
  for (int t = 0; t < trials; ++t) {
    rejected += GoodnessOfFit(Draw(truth, n, rng), reference, alpha).rejected();
  }
  return static_cast<double>(rejected) / trials;
}

TEST(SampleStatsTest, GoodnessOfFitHoldsItsSignificance) {
  const double rate = RejectionRate(kShape, Reference(kShape), 2000, 0.01, 3000);
  EXPECT_GT(rate, 0.004);
  EXPECT_LT(rate, 0.018);
}

TEST(SampleStatsTest, GoodnessOfFitPoolsSmallCellsIntoTheResidual) {
  // 100 draws: only outcomes with n p >= 5 are cells, the rest one residual cell.
  const ChiSquareTest t = GoodnessOfFit({{{0}, 30}, {{1}, 20}, {{9}, 50}}, Reference(kShape), 0.01);
  // Cells 0..5 (expected 30, 20, 12, 8, 6, 5), residual 1 - 0.81 = 0.19: 7 cells.
  EXPECT_EQ(t.df, 6);
}

TEST(SampleStatsTest, DetectableShiftHasItsPower) {
  const int n = 2000;
  const double alpha = 0.001;
  std::mt19937_64 rng(1);
  const ChiSquareTest h0 = GoodnessOfFit(Draw(kShape, n, rng), Reference(kShape), alpha);
  const double e = DetectableShift(n, h0.df, alpha, kShape[0], kShape[1], 0.9);
  EXPECT_GT(e, 0.01);
  EXPECT_LT(e, 0.1);
  std::vector<double> shifted = kShape;
  shifted[0] -= e;
  shifted[1] += e;
  const double power = RejectionRate(shifted, Reference(kShape), n, alpha, 1000);
  EXPECT_GT(power, 0.84) << "shift " << e;
  EXPECT_LT(power, 0.96) << "shift " << e;
  // Half the shift is seldom seen: the figure is the test's real resolution.
  shifted = kShape;
  shifted[0] -= e / 2;
  shifted[1] += e / 2;
  EXPECT_LT(RejectionRate(shifted, Reference(kShape), n, alpha, 1000), 0.4);
}

TEST(SampleStatsTest, TwoSampleHoldsItsSignificanceAndSeesAShift) {
  std::mt19937_64 rng(7);
  int same = 0, shifted_rejected = 0;
  std::vector<double> shifted = kShape;
  shifted[0] -= 0.06;
  shifted[2] += 0.06;
  const int trials = 1000;
  for (int t = 0; t < trials; ++t) {
    const Counts a = Draw(kShape, 2000, rng);
    same += TwoSample(a, Draw(kShape, 3000, rng), 0.01).rejected();
    shifted_rejected += TwoSample(a, Draw(shifted, 3000, rng), 0.01).rejected();
  }
  EXPECT_LT(same, 0.02 * trials);
  EXPECT_GT(shifted_rejected, 0.9 * trials);
}

TEST(SampleStatsTest, MarginalCountsOnePosition) {
  const Counts c = {{{1, 2, 3}, 4}, {{1, 5, 3}, 2}, {{7, 2}, 1}, {{9}, 8}};
  const Counts m = Marginal(c, 1);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at({2}), 5);
  EXPECT_EQ(m.at({5}), 2);
}

}  // namespace
}  // namespace tandem::e2e
