#include "coordinator/relative_slowdown.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem::coordinator {
namespace {

TEST(RelativeSlowdownTest, NoTreatedWorkMeansNoSlowdown) {
  RelativeSlowdown s;
  EXPECT_DOUBLE_EQ(s.Factor(), 1.0);
  for (int i = 0; i < 20; ++i) s.Observe(false, 2.0, 1.0);  // A fit that is off for all work.
  EXPECT_DOUBLE_EQ(s.Factor(), 1.0);
}

TEST(RelativeSlowdownTest, MeasuresTreatedAgainstReferenceWorkNotAgainstTheFit) {
  RelativeSlowdown s({.prior_weight = 1, .forgetting = 1, .relax = 1, .max_slowdown = 4});
  // The fit predicts 1 ms; reference work takes 1.2 ms, treated work 1.8 ms: 1.5x.
  for (int i = 0; i < 99; ++i) {
    s.Observe(false, 1.2, 1.0);
    s.Observe(true, 1.8, 1.0);
  }
  // Shrunk by the prior: weight 99 against 1.
  EXPECT_NEAR(s.Factor(), std::exp(0.99 * std::log(1.5)), 1e-9);
  EXPECT_NEAR(s.treated_weight(), 99, 1e-9);
}

TEST(RelativeSlowdownTest, ThinEvidenceIsShrunkTowardsNoSlowdown) {
  RelativeSlowdown s({.prior_weight = 4, .forgetting = 1, .relax = 1, .max_slowdown = 4});
  s.Observe(false, 1.0, 1.0);
  s.Observe(true, 2.0, 1.0);
  EXPECT_NEAR(s.Factor(), std::exp(std::log(2.0) / 5), 1e-9);
}

TEST(RelativeSlowdownTest, ClampedToOneAndToTheMaximum) {
  RelativeSlowdown faster({.prior_weight = 1, .forgetting = 1, .relax = 1, .max_slowdown = 3});
  for (int i = 0; i < 10; ++i) {
    faster.Observe(false, 2.0, 1.0);
    faster.Observe(true, 1.0, 1.0);
  }
  EXPECT_DOUBLE_EQ(faster.Factor(), 1.0);
  RelativeSlowdown slower({.prior_weight = 1, .forgetting = 1, .relax = 1, .max_slowdown = 3});
  for (int i = 0; i < 10; ++i) slower.Observe(true, 100.0, 1.0);
  EXPECT_DOUBLE_EQ(slower.Factor(), 3.0);
}

TEST(RelativeSlowdownTest, ReferenceWorkRelaxesAnOldMeasurementTowardsThePrior) {
  RelativeSlowdown s({.prior_weight = 4, .forgetting = 0.95, .relax = 0.99, .max_slowdown = 4});
  for (int i = 0; i < 50; ++i) s.Observe(true, 2.0, 1.0);
  const double measured = s.Factor();
  EXPECT_GT(measured, 1.7);
  for (int i = 0; i < 200; ++i) s.Observe(false, 1.0, 1.0);
  EXPECT_LT(s.Factor(), 1.0 + (measured - 1) / 2);
  EXPECT_GT(s.Factor(), 1.0);
  for (int i = 0; i < 2000; ++i) s.Observe(false, 1.0, 1.0);
  EXPECT_NEAR(s.Factor(), 1.0, 1e-3);
}

TEST(RelativeSlowdownTest, IgnoresNonPositiveAndNonFiniteTimes) {
  RelativeSlowdown s({.prior_weight = 1, .forgetting = 1, .relax = 1, .max_slowdown = 4});
  s.Observe(true, 0.0, 1.0);
  s.Observe(true, 1.0, -1.0);
  s.Observe(true, NAN, 1.0);
  s.Observe(true, INFINITY, 1.0);
  EXPECT_DOUBLE_EQ(s.treated_weight(), 0.0);
  EXPECT_DOUBLE_EQ(s.Factor(), 1.0);
}

TEST(RelativeSlowdownTest, RecentCallsWeighMore) {
  RelativeSlowdown s({.prior_weight = 0.001, .forgetting = 0.5, .relax = 1, .max_slowdown = 4});
  for (int i = 0; i < 30; ++i) s.Observe(true, 3.0, 1.0);
  for (int i = 0; i < 30; ++i) s.Observe(true, 1.5, 1.0);
  EXPECT_NEAR(s.Factor(), 1.5, 1e-3);
}

}  // namespace
}  // namespace tandem::coordinator
