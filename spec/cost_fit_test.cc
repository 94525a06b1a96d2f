#include "spec/cost_fit.h"

#include <gtest/gtest.h>

#include <random>

namespace tandem {
namespace spec {
namespace {

TEST(LinearCostFitTest, RecoversALineFromNoisyMeasurements) {
  LinearCostFit fit(0.999, 0.0, 0.0, 0.1);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> size(1, 80);
  std::normal_distribution<double> noise(0.0, 0.05);
  for (int i = 0; i < 2000; ++i) {
    const int x = size(rng);
    fit.Observe(x, 1.5 + 0.04 * x + noise(rng));
  }
  EXPECT_NEAR(fit.intercept(), 1.5, 0.03);
  EXPECT_NEAR(fit.slope(), 0.04, 0.001);
  EXPECT_NEAR(fit.Predict(10), 1.9, 0.03);
}

TEST(LinearCostFitTest, ForgettingFollowsAChange) {
  LinearCostFit fit(0.95, 0.0, 0.0, 0.1);
  for (int i = 0; i < 500; ++i) fit.Observe(1 + i % 8, 1.0 + 0.1 * (1 + i % 8));
  for (int i = 0; i < 500; ++i) fit.Observe(1 + i % 8, 3.0 + 0.1 * (1 + i % 8));
  EXPECT_NEAR(fit.intercept(), 3.0, 0.01);
}

TEST(LinearCostFitTest, PriorHoldsWhenSizesNeverVary) {
  // Every measurement at x = 5: the data fix the level there, the prior the shape.
  LinearCostFit fit(0.99, 1.0, 0.2, 2.0);
  for (int i = 0; i < 200; ++i) fit.Observe(5, 4.0);
  EXPECT_NEAR(fit.Predict(5), 4.0, 0.05);
  EXPECT_GE(fit.intercept(), 0.0);
  EXPECT_GE(fit.slope(), 0.0);
}

TEST(LinearCostFitTest, NegativeSlopesAndBadValuesAreClamped) {
  LinearCostFit fit(1.0, 0.0, 0.0, 0.0);
  fit.Observe(1, 5.0);
  fit.Observe(10, 1.0);  // Cost falling with size: noise, not a real negative slope.
  fit.Observe(NAN, 3.0);
  EXPECT_EQ(fit.observations(), 2);
  EXPECT_EQ(fit.slope(), 0.0);
  EXPECT_DOUBLE_EQ(fit.intercept(), 3.0);
}

TEST(BatchCostModelTest, TermsInUnitsOfAPlainStep) {
  LinearCostFit verify(1.0, 0, 0, 0), draft(1.0, 0, 0, 0);
  for (int i = 0; i < 20; ++i) {
    const double rows = 4 + i;
    verify.Observe(rows, 2.0 + 0.1 * rows);      // a = 2 ms, b = 0.1 ms per row
    draft.Observe(1 + i, 0.5 + 0.05 * (1 + i));  // fixed 0.5 ms, 0.05 ms per token
  }
  CostModel fallback;
  fallback.draft_cost = 99;
  const CostModel m = BatchCostModel(verify, draft, 4, fallback);
  const double step = 2.0 + 0.4;  // T = V(4)
  EXPECT_NEAR(m.draft_cost, 0.05 * 4 / step, 1e-9);
  EXPECT_NEAR(m.overhead, 0.5 / step, 1e-9);
  EXPECT_NEAR(m.verify_cost(0), 1.0, 1e-9);
  EXPECT_NEAR(m.verify_cost(3), (2.0 + 0.1 * 16) / step, 1e-9);
  // Too few observations: the fallback; a measured verify without draft data keeps
  // the fallback's c and o.
  LinearCostFit empty(1.0, 0, 0, 0);
  EXPECT_EQ(BatchCostModel(empty, draft, 4, fallback).draft_cost, 99);
  const CostModel verify_only = BatchCostModel(verify, empty, 4, fallback);
  EXPECT_EQ(verify_only.draft_cost, 99);
  EXPECT_NEAR(verify_only.verify_cost(3), (2.0 + 0.1 * 16) / step, 1e-9);
  // The coordinator's time per phase is part of every step, and of a draft's phase.
  const CostModel with_h = BatchCostModel(verify, draft, 4, fallback, /*phase_overhead_ms=*/0.6);
  const double step_h = step + 0.6;
  EXPECT_NEAR(with_h.verify_cost(0), 1.0, 1e-9);
  EXPECT_NEAR(with_h.verify_cost(3), (2.0 + 0.6 + 0.1 * 16) / step_h, 1e-9);
  EXPECT_NEAR(with_h.overhead, (0.5 + 0.6) / step_h, 1e-9);
  EXPECT_NEAR(with_h.draft_cost, 0.05 * 4 / step_h, 1e-9);
}

TEST(BatchCostModelTest, ExpensiveVerifyRowsMakeSpeculationLose) {
  // Compute-bound verify (cost proportional to rows) and a costly draft: no K pays.
  LinearCostFit verify(1.0, 0, 0, 0), draft(1.0, 0, 0, 0);
  for (int i = 1; i <= 40; ++i) {
    verify.Observe(i, 0.5 * i);
    draft.Observe(i, 0.3 * i);
  }
  const double alpha = 0.55;
  const CostModel gpu_like;
  EXPECT_GT(BestDraftLength(alpha, gpu_like, 8, false).speedup, 1.0);
  EXPECT_LT(BestDraftLength(alpha, BatchCostModel(verify, draft, 16, gpu_like), 8, false).speedup,
            1.0);
  // Memory-bound verify (flat in rows) and a cheap draft: speculate again.
  LinearCostFit flat(1.0, 0, 0, 0), cheap(1.0, 0, 0, 0);
  for (int i = 1; i <= 40; ++i) {
    flat.Observe(i, 5.0);
    cheap.Observe(i, 0.05 * i);
  }
  EXPECT_GT(BestDraftLength(alpha, BatchCostModel(flat, cheap, 1, gpu_like), 8, false).k, 1);
}

}  // namespace
}  // namespace spec
}  // namespace tandem
