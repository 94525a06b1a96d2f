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
  EXPECT_NEAR(fit.intercept(), 3.0, 1e-5);  // Up to the anchor's 1e-7 pull.
}

TEST(LinearCostFitTest, DelayedCallsHaveBoundedInfluence) {
  // A verify fit's life on a busy machine: most calls are 1 row, a few 5-9 rows, and
  // one call in 20 is delayed tenfold by the scheduler. The slope (what nu(K) is made
  // of) stays near the truth instead of following the delays.
  const double a = 0.6, b = 0.15;
  auto run = [&](LinearCostFit& fit, int seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    std::normal_distribution<double> noise(0.0, 0.03);
    for (int i = 0; i < 400; ++i) {
      const int x = u(rng) < 0.9 ? 1 : 5 + static_cast<int>(u(rng) * 5);
      double y = a + b * x + noise(rng);
      if (u(rng) < 0.05) y *= 10;
      fit.Observe(x, y);
    }
  };
  for (int seed = 1; seed <= 5; ++seed) {
    LinearCostFit fit(0.98, 1.0, 0.05);
    run(fit, seed);
    EXPECT_NEAR(fit.slope(), b, 0.35 * b) << seed;
    EXPECT_NEAR(fit.Predict(5), a + 5 * b, 0.25 * (a + 5 * b)) << seed;
  }
}

TEST(LinearCostFitTest, AClippedFitStillFollowsARealChange) {
  LinearCostFit fit(0.95, 0.0, 0.0, 0.1);
  for (int i = 0; i < 200; ++i) fit.Observe(1 + i % 8, 1.0 + 0.1 * (1 + i % 8));
  // Every call is suddenly 3x as slow (another process took a core).
  for (int i = 0; i < 150; ++i) fit.Observe(1 + i % 8, 3.0 * (1.0 + 0.1 * (1 + i % 8)));
  EXPECT_NEAR(fit.Predict(4), 3.0 * 1.4, 0.1);
}

TEST(LinearCostFitTest, ANegativeInterceptGivesTheFitThroughTheOrigin) {
  LinearCostFit fit(1.0, 0.0, 0.0, 0.0);
  fit.Observe(1, 0.5);
  fit.Observe(2, 2.5);  // Solved: a = -1.5, b = 2.
  EXPECT_EQ(fit.intercept(), 0.0);
  EXPECT_NEAR(fit.slope(), (1 * 0.5 + 2 * 2.5) / (1.0 + 4.0), 1e-5);
}

TEST(BatchCallFitTest, SeparatesTheCostOfASequenceFromTheCostOfARow) {
  // 0.3 ms per call, 0.2 ms per sequence, 0.12 ms per row: 4 sequences of 1 row cost
  // more than 1 sequence of 4 rows.
  BatchCallFit fit(0.98, 1.0, 0.0, 0.05);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> seqs(1, 8), k(0, 6);
  std::normal_distribution<double> noise(0.0, 0.02);
  for (int i = 0; i < 600; ++i) {
    const int s = seqs(rng), rows = s * (1 + k(rng));
    fit.Observe(s, rows, 0.3 + 0.2 * s + 0.12 * rows + noise(rng));
  }
  EXPECT_NEAR(fit.intercept(), 0.3, 0.05);
  EXPECT_NEAR(fit.per_sequence(), 0.2, 0.02);
  EXPECT_NEAR(fit.per_row(), 0.12, 0.01);
  EXPECT_GT(fit.Predict(4, 4), fit.Predict(1, 4));
}

// 300 calls of mixed shapes (1-4 sequences of 1-9 rows) at 0.3 ms per call, 0.2 ms per
// sequence and 0.12 ms per row, with N(0, 0.02) ms noise drawn from `rng`: what a fit
// has learnt before a long run of one shape.
void ObserveMixedShapes(BatchCallFit& fit, std::mt19937& rng) {
  std::uniform_int_distribution<int> k(0, 8);
  std::normal_distribution<double> noise(0.0, 0.02);
  for (int i = 0; i < 300; ++i) {
    const int s = 1 + i % 4, rows = s * (1 + k(rng));
    fit.Observe(s, rows, 0.3 + 0.2 * s + 0.12 * rows + noise(rng));
  }
}

TEST(BatchCallFitTest, ALongRunOfOneShapeKeepsWhatOtherShapesSaid) {
  // The draft is off for a long while: every call is one plain row. The per-row cost
  // measured before (what nu(K) is made of) must survive, not decay to the prior.
  BatchCallFit fit(0.98, 1.0, 0.0, 0.05);
  std::mt19937 rng(5);
  ObserveMixedShapes(fit, rng);
  std::normal_distribution<double> noise(0.0, 0.02);
  for (int i = 0; i < 1000; ++i) fit.Observe(1, 1, 0.62 + noise(rng));
  EXPECT_NEAR(fit.per_row(), 0.12, 0.02);
  EXPECT_NEAR(fit.Predict(1, 1), 0.62, 0.01);
  EXPECT_NEAR(fit.Predict(1, 5), 0.62 + 4 * 0.12, 0.1);
  // ... and a change of that one shape is followed.
  for (int i = 0; i < 300; ++i) fit.Observe(1, 1, 0.9 + noise(rng));
  EXPECT_NEAR(fit.Predict(1, 1), 0.9, 0.02);
}

TEST(BatchCallFitTest, AVeryLongRunOfOneShapeNeitherCollapsesNorForgetsTheSlope) {
  // Tens of thousands of plain one-row calls (a concurrency-1 server whose speculation is
  // off): even the long memory then holds only that shape. The fit used to fall to all
  // zeros there (a singular system), pricing a verify at nothing; it must keep the level
  // of the calls it sees and the per-row cost measured before.
  BatchCallFit fit(0.98, 1.0, 0.0, 0.05);
  std::mt19937 rng(7);
  ObserveMixedShapes(fit, rng);
  std::normal_distribution<double> noise(0.0, 0.02);
  for (int i = 0; i < 60000; ++i) {
    fit.Observe(1, 1, 0.62 + noise(rng));
    if (i % 10000 == 0) {
      ASSERT_GT(fit.Predict(1, 1), 0.5) << i;
    }
  }
  EXPECT_NEAR(fit.Predict(1, 1), 0.62, 0.02);
  EXPECT_NEAR(fit.per_row(), 0.12, 0.03);
  EXPECT_NEAR(fit.Predict(1, 5), 0.62 + 4 * 0.12, 0.12);
}

TEST(BatchCostModelTest, TermsInUnitsOfAPlainStep) {
  BatchCallFit verify(1.0, 0, 0, 0, 0);
  LinearCostFit draft(1.0, 0, 0, 0);
  for (int i = 0; i < 20; ++i) {
    const double sequences = 1 + i % 4, rows = sequences + i;
    // a = 1.6 ms, 0.1 ms per sequence, 0.1 ms per row.
    verify.Observe(sequences, rows, 1.6 + 0.1 * sequences + 0.1 * rows);
    draft.Observe(1 + i, 0.5 + 0.05 * (1 + i));  // fixed 0.5 ms, 0.05 ms per token
  }
  CostModel fallback;
  fallback.draft_cost = 99;
  const CostModel m = BatchCostModel(verify, draft, 4, fallback);
  const double step = 1.6 + 0.4 + 0.4;  // T = V(4 sequences, 4 rows)
  EXPECT_NEAR(m.draft_cost, 0.05 * 4 / step, 1e-9);
  EXPECT_NEAR(m.overhead, 0.5 / step, 1e-9);
  EXPECT_NEAR(m.verify_cost(0), 1.0, 1e-9);
  EXPECT_NEAR(m.verify_cost(3), (2.0 + 0.1 * 16) / step, 1e-9);
  // Too few observations: the fallback; a measured verify without draft data keeps
  // the fallback's c and o.
  BatchCallFit empty(1.0, 0, 0, 0, 0);
  LinearCostFit no_draft(1.0, 0, 0, 0);
  EXPECT_EQ(BatchCostModel(empty, draft, 4, fallback).draft_cost, 99);
  const CostModel verify_only = BatchCostModel(verify, no_draft, 4, fallback);
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

TEST(BatchCostModelTest, FeedCostIsPricedForTheWholeBatch) {
  BatchCallFit verify(1.0, 0, 0, 0, 0);
  LinearCostFit feed(1.0, 0, 0, 0);
  for (int i = 0; i < 20; ++i) {
    const double sequences = 1 + i % 4, rows = sequences + i;
    verify.Observe(sequences, rows, 1.6 + 0.1 * sequences + 0.1 * rows);
  }
  EXPECT_EQ(BatchFeedCost(verify, feed, 4), 0.0);  // No feed measured yet: not charged.
  for (int i = 0; i < 4; ++i) feed.Observe(16 + 16 * i, 0.3 + 0.01 * (16 + 16 * i));
  const double step1 = 1.6 + 0.1 + 0.1, step4 = 1.6 + 0.4 + 0.4;
  EXPECT_NEAR(BatchFeedCost(verify, feed, 1), 0.01 / step1, 1e-9);
  // At batch 4 the step is longer, but the feed holds up four sequences' tokens.
  EXPECT_NEAR(BatchFeedCost(verify, feed, 4), 0.01 * 4 / step4, 1e-9);
  EXPECT_NEAR(BatchFeedCost(verify, feed, 4, /*phase_overhead_ms=*/0.6), 0.04 / (step4 + 0.6),
              1e-9);
  EXPECT_EQ(BatchFeedCost(verify, feed, 4, 0, /*min_observations=*/5), 0.0);
}

TEST(BatchCostModelTest, ExpensiveVerifyRowsMakeSpeculationLose) {
  // Compute-bound verify (cost proportional to rows) and a costly draft: no K pays.
  BatchCallFit verify(1.0, 0, 0, 0, 0);
  LinearCostFit draft(1.0, 0, 0, 0);
  for (int i = 1; i <= 40; ++i) {
    verify.Observe(1 + i % 16, 16 + i, 0.5 * (16 + i));
    draft.Observe(i, 0.3 * i);
  }
  const double alpha = 0.55;
  const CostModel gpu_like;
  EXPECT_GT(BestDraftLength(alpha, gpu_like, 8, false).speedup, 1.0);
  EXPECT_LT(BestDraftLength(alpha, BatchCostModel(verify, draft, 16, gpu_like), 8, false).speedup,
            1.0);
  // Memory-bound verify (flat in rows) and a cheap draft: speculate again.
  BatchCallFit flat(1.0, 0, 0, 0, 0);
  LinearCostFit cheap(1.0, 0, 0, 0);
  for (int i = 1; i <= 40; ++i) {
    flat.Observe(1 + i % 3, 1 + i, 5.0);
    cheap.Observe(i, 0.05 * i);
  }
  EXPECT_GT(BestDraftLength(alpha, BatchCostModel(flat, cheap, 1, gpu_like), 8, false).k, 1);
}

}  // namespace
}  // namespace spec
}  // namespace tandem
