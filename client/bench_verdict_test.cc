#include "client/bench_verdict.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem::client {
namespace {

// The control's ratios to `none` over five rounds: the run's noise floor, 0.93-1.08.
const std::vector<double> kControl = {0.97, 1.08, 0.93, 1.02, 1.00};

TEST(CompareWithControlTest, FasterWhenEveryRoundBeatsTheControlsBest) {
  EXPECT_EQ(CompareWithControl({1.10, 1.35, 1.09, 1.20, 1.50}, kControl), NoiseVerdict::kFaster);
}

TEST(CompareWithControlTest, SlowerWhenEveryRoundIsBelowTheControlsWorst) {
  EXPECT_EQ(CompareWithControl({0.80, 0.92, 0.85, 0.70, 0.90}, kControl), NoiseVerdict::kSlower);
}

TEST(CompareWithControlTest, OverlappingRangesAreWithinNoise) {
  // A high median (1.20x) is no verdict when one round fell inside the control's range.
  EXPECT_EQ(CompareWithControl({1.20, 1.25, 1.05, 1.30, 1.22}, kControl),
            NoiseVerdict::kWithinNoise);
  // Ties with the control's extreme are not beyond it.
  EXPECT_EQ(CompareWithControl({1.08, 1.2, 1.3}, kControl), NoiseVerdict::kWithinNoise);
  EXPECT_EQ(CompareWithControl({0.93, 0.8, 0.7}, kControl), NoiseVerdict::kWithinNoise);
}

TEST(CompareWithControlTest, NeedsThreeFiniteRoundsOnEachSide) {
  EXPECT_EQ(CompareWithControl({2.0, 2.1}, kControl), NoiseVerdict::kTooFewRounds);
  EXPECT_EQ(CompareWithControl({2.0, 2.1, NAN}, kControl), NoiseVerdict::kTooFewRounds);
  EXPECT_EQ(CompareWithControl({2.0, 2.1, 2.2}, {1.0, NAN, 1.1}), NoiseVerdict::kTooFewRounds);
  EXPECT_EQ(CompareWithControl({2.0, NAN, 2.1, 2.2}, {1.0, 0.9, 1.1}), NoiseVerdict::kFaster);
}

TEST(VerdictNameTest, NamesEveryVerdict) {
  EXPECT_EQ(VerdictName(NoiseVerdict::kFaster), "faster");
  EXPECT_EQ(VerdictName(NoiseVerdict::kSlower), "slower");
  EXPECT_EQ(VerdictName(NoiseVerdict::kWithinNoise), "within noise");
  EXPECT_EQ(VerdictName(NoiseVerdict::kTooFewRounds), "too few rounds");
}

// Every way to split the values 0..n+m-1 into the row's n and the control's m, counted
// directly: the share that the range rule calls faster or slower.
double EnumeratedFalseVerdicts(int n, int m) {
  int total = 0, verdicts = 0;
  for (unsigned mask = 0; mask < (1u << (n + m)); ++mask) {
    if (__builtin_popcount(mask) != n) continue;
    std::vector<double> row, control;
    for (int v = 0; v < n + m; ++v) ((mask >> v) & 1 ? row : control).push_back(v);
    ++total;
    verdicts += CompareWithControl(row, control) != NoiseVerdict::kWithinNoise;
  }
  return static_cast<double>(verdicts) / total;
}

TEST(FalseVerdictChanceTest, MatchesEnumerationOfEveryOrder) {
  EXPECT_DOUBLE_EQ(FalseVerdictChance(3, 3), 0.1);
  EXPECT_NEAR(FalseVerdictChance(5, 5), 2.0 / 252, 1e-12);
  for (int n = 3; n <= 6; ++n) {
    for (int m = 3; m <= 6; ++m) {
      EXPECT_NEAR(FalseVerdictChance(n, m), EnumeratedFalseVerdicts(n, m), 1e-12) << n << " " << m;
    }
  }
  EXPECT_TRUE(std::isnan(FalseVerdictChance(0, 3)));
}

}  // namespace
}  // namespace tandem::client
