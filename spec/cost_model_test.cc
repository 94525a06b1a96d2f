#include "spec/cost_model.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec/rng.h"

namespace tandem {
namespace spec {
namespace {

using ::testing::HasSubstr;

TEST(ExpectedTokensTest, HandComputedValues) {
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.5, 3), 1.875);   // (1 - 0.5^4) / 0.5
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.8, 4), 3.3616);  // (1 - 0.32768) / 0.2
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.8, 0), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.0, 5), 1.0);
  // alpha -> 1 limit is K + 1, continuous from below.
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(1.0, 4), 5.0);
  EXPECT_NEAR(ExpectedTokensPerStep(1.0 - 1e-12, 4), 5.0, 1e-9);
  // Out-of-range input is clamped.
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(1.5, 2), 3.0);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(-0.5, 2), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(std::nan(""), 2), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.5, -3), 1.0);
}

TEST(SpeedupTest, HandComputedValues) {
  // alpha 0.8, K 4, c 0.4, nu 1.1, o 0.05: E = 3.3616.
  EXPECT_NEAR(SequentialSpeedup(0.8, 4, 0.4, 1.1, 0.05), 3.3616 / 2.75, 1e-12);      // 1.22240
  EXPECT_NEAR(PipelinedSpeedupBound(0.8, 4, 0.4, 1.1, 0.05), 3.3616 / 1.65, 1e-12);  // 2.03733
  // When drafting is the cheaper side, the pipelined bound is limited by verify.
  EXPECT_NEAR(PipelinedSpeedupBound(0.8, 2, 0.4, 1.1, 0.05), 2.44 / 1.15, 1e-12);
  EXPECT_EQ(SequentialSpeedup(0.8, 0, 0.4, 1.1, 0.05), 1.0);
  EXPECT_EQ(PipelinedSpeedupBound(0.8, 0, 0.4, 1.1, 0.05), 1.0);
}

TEST(SpeedupTest, AGainNeedsAlphaAboveC) {
  // K = 1, nu = 1, o = 0: S = (1 + alpha) / (1 + c) > 1 iff alpha > c.
  EXPECT_GT(SequentialSpeedup(0.36, 1, 0.35, 1.0, 0.0), 1.0);
  EXPECT_LT(SequentialSpeedup(0.34, 1, 0.35, 1.0, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(SequentialSpeedup(0.35, 1, 0.35, 1.0, 0.0), 1.0);
}

TEST(VerifyCostTest, LinearAndTable) {
  const VerifyCostFn linear = LinearVerifyCost(0.02);
  EXPECT_DOUBLE_EQ(linear(0), 1.0);
  EXPECT_DOUBLE_EQ(linear(5), 1.1);
  const VerifyCostFn table = TableVerifyCost({1.0, 1.1, 1.3});
  EXPECT_DOUBLE_EQ(table(1), 1.1);
  EXPECT_DOUBLE_EQ(table(2), 1.3);
  EXPECT_DOUBLE_EQ(table(4), 1.7);  // Extends the last segment (slope 0.2).
  EXPECT_DOUBLE_EQ(TableVerifyCost({1.2})(9), 1.2);
  EXPECT_DOUBLE_EQ(TableVerifyCost({})(3), 1.0);
}

TEST(BestDraftLengthTest, HandComputedChoices) {
  CostModel cheap;
  cheap.draft_cost = 0.1;
  cheap.verify_cost = LinearVerifyCost(0.0);
  cheap.overhead = 0.0;
  // alpha 0.5: S(1..4) = 1.5/1.1, 1.75/1.2, 1.875/1.3, 1.9375/1.4 -> K = 2.
  DraftLengthChoice choice = BestDraftLength(0.5, cheap, 5, false);
  EXPECT_EQ(choice.k, 2);
  EXPECT_NEAR(choice.speedup, 1.75 / 1.2, 1e-12);
  // alpha 0.9, c 0.05: S still rises at K = 8 (6.12579511 / 1.4), so max_k wins.
  cheap.draft_cost = 0.05;
  choice = BestDraftLength(0.9, cheap, 8, false);
  EXPECT_EQ(choice.k, 8);
  EXPECT_NEAR(choice.speedup, 6.12579511 / 1.4, 1e-9);
  // Pipelined, c 0.3, nu 1: E / max(1, 0.3 K); K = 3 gives 2.952, K = 4 gives 2.80133.
  CostModel pipeline;
  pipeline.draft_cost = 0.3;
  pipeline.verify_cost = LinearVerifyCost(0.0);
  pipeline.overhead = 0.0;
  choice = BestDraftLength(0.8, pipeline, 8, true);
  EXPECT_EQ(choice.k, 3);
  EXPECT_NEAR(choice.speedup, 2.952, 1e-12);
  // Ties go to the smaller K: alpha 0 gives S = 1 / max(1, 0.3 K) = 1 for K = 1..3.
  EXPECT_EQ(BestDraftLength(0.0, pipeline, 8, true).k, 1);
  EXPECT_EQ(BestDraftLength(0.8, pipeline, 0, true).k, 0);
}

TEST(ValidateAdaptiveKConfigTest, NamesBadFields) {
  EXPECT_TRUE(ValidateAdaptiveKConfig(AdaptiveKConfig()).ok());
  const auto expect_bad = [](AdaptiveKConfig config, const char* field) {
    const absl::Status s = ValidateAdaptiveKConfig(config);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(std::string(s.message()), HasSubstr(field));
  };
  AdaptiveKConfig c;
  c.max_k = 0;
  expect_bad(c, "max_k");
  c = AdaptiveKConfig();
  c.cost.draft_cost = -0.1;
  expect_bad(c, "draft_cost");
  c = AdaptiveKConfig();
  c.cost.overhead = std::numeric_limits<double>::infinity();
  expect_bad(c, "overhead");
  c = AdaptiveKConfig();
  c.cost.verify_cost = nullptr;
  expect_bad(c, "verify_cost");
  c = AdaptiveKConfig();
  c.cost.verify_cost = TableVerifyCost({1.0, 0.0});
  expect_bad(c, "verify_cost(1)");
  c = AdaptiveKConfig();
  c.smoothing = 0.0;
  expect_bad(c, "smoothing");
  c = AdaptiveKConfig();
  c.initial_acceptance = 1.2;
  expect_bad(c, "initial_acceptance");
  c = AdaptiveKConfig();
  c.min_speedup = 0.0;
  expect_bad(c, "min_speedup");
  c = AdaptiveKConfig();
  c.probe_interval = -1;
  expect_bad(c, "probe_interval");
}

AdaptiveKConfig TestConfig() {
  AdaptiveKConfig config;
  config.max_k = 6;
  config.cost.draft_cost = 0.1;
  config.cost.verify_cost = LinearVerifyCost(0.0);
  config.cost.overhead = 0.05;
  config.smoothing = 0.5;
  config.initial_acceptance = 0.6;
  config.probe_interval = 4;
  return config;
}

TEST(AdaptiveKTest, MovingAverageOfAcceptedOverTrialsByHand) {
  AdaptiveK controller(TestConfig());
  EXPECT_DOUBLE_EQ(controller.acceptance_estimate(), 0.6);
  // 2 of 4 accepted: 3 trials. Averages (0.5*0.6 + 0.5*2, 0.5*1 + 0.5*3) = (1.3, 2).
  controller.Observe(4, 2);
  EXPECT_NEAR(controller.acceptance_estimate(), 0.65, 1e-12);
  // 3 of 3 accepted: 3 trials. (0.65 + 1.5, 1 + 1.5) = (2.15, 2.5).
  controller.Observe(3, 3);
  EXPECT_NEAR(controller.acceptance_estimate(), 0.86, 1e-12);
  // Plain steps and nonsense counts leave it alone or are clamped.
  controller.Observe(0, 0);
  EXPECT_NEAR(controller.acceptance_estimate(), 0.86, 1e-12);
  controller.Observe(2, 5);  // Clamped to 2 of 2: (1.075 + 1, 1.25 + 1) = (2.075, 2.25).
  EXPECT_NEAR(controller.acceptance_estimate(), 2.075 / 2.25, 1e-12);
}

TEST(AdaptiveKTest, ChoosesTheModelledBestK) {
  AdaptiveK controller(TestConfig());
  // alpha 0.6, c 0.1, nu 1, o 0.05: S(K) = E / (1.05 + 0.1 K); compute the best by
  // hand-written formula: E(1..6) = 1.6, 1.96, 2.176, 2.3056, 2.38336, 2.430016.
  const double e[] = {1.6, 1.96, 2.176, 2.3056, 2.38336, 2.430016};
  int best = 0;
  for (int k = 1; k <= 6; ++k) {
    if (e[k - 1] / (1.05 + 0.1 * k) > e[best] / (1.05 + 0.1 * (best + 1))) best = k - 1;
  }
  EXPECT_EQ(controller.NextK(), best + 1);  // K = 3: 2.176 / 1.35 = 1.612.
  EXPECT_EQ(controller.NextK(), 3);
  EXPECT_NEAR(controller.modelled_speedup(), 2.176 / 1.35, 1e-12);
}

TEST(AdaptiveKTest, RisesToMaxKWhenEverythingIsAccepted) {
  AdaptiveK controller(TestConfig());
  for (int step = 0; step < 30; ++step) {
    const int k = controller.NextK();
    ASSERT_GE(k, 1);
    controller.Observe(k, k);
  }
  EXPECT_GT(controller.acceptance_estimate(), 0.999);
  EXPECT_EQ(controller.NextK(), 6);
}

TEST(AdaptiveKTest, TurnsOffWhenNoGainAndProbesPeriodically) {
  AdaptiveKConfig config = TestConfig();
  config.cost.draft_cost = 0.4;  // alpha must beat ~0.45 for any gain now.
  AdaptiveK controller(config);
  ASSERT_GE(controller.NextK(), 1);  // alpha 0.6 at first.
  // Rejections lower the estimate until the best modelled speedup drops below 1.
  int steps = 0;
  while (controller.NextK() > 0 && steps < 20) {
    controller.Observe(controller.NextK(), 0);
    ++steps;
  }
  EXPECT_EQ(controller.NextK(), 0);
  // Off happens as soon as S(K = 1) = (1 + alpha) / 1.45 < 1, i.e. alpha < 0.45:
  // averages (0.5^n * 0.6, 1) -> 0.6, 0.3: one rejected step is enough.
  EXPECT_EQ(steps, 1);
  EXPECT_NEAR(controller.acceptance_estimate(), 0.3, 1e-12);
  EXPECT_EQ(controller.modelled_speedup(), 1.0);
  // Four plain steps later a K = 1 probe is due; after it, off again.
  for (int step = 0; step < 3; ++step) {
    controller.Observe(0, 0);
    EXPECT_EQ(controller.NextK(), 0);
  }
  controller.Observe(0, 0);
  EXPECT_EQ(controller.NextK(), 1);
  controller.Observe(1, 0);
  EXPECT_EQ(controller.NextK(), 0);
  // Probes that succeed bring speculation back.
  int probes = 0;
  while (controller.NextK() <= 1 && probes < 20) {
    const int k = controller.NextK();
    controller.Observe(k, k);
    probes += k;
  }
  EXPECT_GE(controller.NextK(), 2);
  // With probing disabled, off stays off.
  config.probe_interval = 0;
  AdaptiveK never(config);
  never.Observe(never.NextK(), 0);
  ASSERT_EQ(never.NextK(), 0);
  for (int step = 0; step < 100; ++step) never.Observe(0, 0);
  EXPECT_EQ(never.NextK(), 0);
}

TEST(AdaptiveKTest, EstimateIsUnbiasedForIidAcceptance) {
  // Each proposal passes independently with probability 0.7; K fixed at 6 by a high
  // max and cheap drafts. accepted / proposed would give ~0.7(1-0.7^6)/(0.3*6) = 0.35.
  AdaptiveKConfig config = TestConfig();
  config.smoothing = 0.01;
  AdaptiveK controller(config);
  double accepted_total = 0, proposed_total = 0;
  for (uint64_t step = 0; step < 20000; ++step) {
    const int k = 6;
    int accepted = 0;
    while (accepted < k &&
           UniformDouble(31, RandomStream::kAccept, step, static_cast<uint32_t>(accepted)) < 0.7) {
      ++accepted;
    }
    controller.Observe(k, accepted);
    accepted_total += accepted;
    proposed_total += k;
  }
  EXPECT_NEAR(accepted_total / proposed_total, 0.35, 0.01);
  // EMA with weight 0.01 averages ~200 steps (~500 trials): sd ~ 0.02; allow 0.06.
  EXPECT_NEAR(controller.acceptance_estimate(), 0.7, 0.06);
}

}  // namespace
}  // namespace spec
}  // namespace tandem
