#include "coordinator/pipeline_mode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace tandem::coordinator {
namespace {

// Verify: 10 ms + 0.1 ms per row; draft: 1 ms + 0.5 ms per proposed token.
PipelineInputs Inputs(double batch, double k, CallCost draft = {1.0, 0.5}) {
  PipelineInputs in;
  in.verify = {10.0, 0.1};
  in.draft = draft;
  in.batch = batch;
  in.k = k;
  return in;
}

TEST(PipelineModeTest, PredictsEachModeFromTheFits) {
  PipelineInputs in = Inputs(4, 3);
  in.continuations = true;
  in.hit_rate = 0.5;
  const PipelinePrediction p = PredictRoundTimes(in);
  const double verify = 10 + 0.1 * 16, draft = 1 + 0.5 * 12;
  EXPECT_DOUBLE_EQ(p.sequential_ms, draft + verify);
  // Continuations (4 tokens each: 9 ms) hide under the verify; half the drafts remain.
  EXPECT_DOUBLE_EQ(p.lockstep_ms, verify + 0.5 * draft);
  // Halves of 2: verify 10.8, draft 4 each.
  EXPECT_DOUBLE_EQ(p.ping_pong_ms, 2 * 10.8);
  EXPECT_DOUBLE_EQ(p.Of(PipelineMode::kPingPong), p.ping_pong_ms);
}

TEST(PipelineModeTest, ALockstepHitSavesAPhaseOfCoordinatorTime) {
  PipelineInputs in = Inputs(4, 3);
  in.continuations = true;
  in.hit_rate = 0.5;
  const PipelinePrediction bare = PredictRoundTimes(in);
  in.phase_overhead_ms = 2;
  const PipelinePrediction p = PredictRoundTimes(in);
  EXPECT_DOUBLE_EQ(p.sequential_ms, bare.sequential_ms + 4);
  EXPECT_DOUBLE_EQ(p.ping_pong_ms, bare.ping_pong_ms + 4);
  EXPECT_DOUBLE_EQ(p.lockstep_ms, bare.lockstep_ms + 3);  // 1 + (1 - h) phases.
}

TEST(PipelineModeTest, LockstepWithoutContinuationsIsSequential) {
  const PipelinePrediction p = PredictRoundTimes(Inputs(4, 3));
  EXPECT_DOUBLE_EQ(p.lockstep_ms, p.sequential_ms);
  EXPECT_TRUE(std::isinf(PredictRoundTimes(Inputs(1, 3)).ping_pong_ms));
}

TEST(PipelineModeTest, CheapDraftStaysSequentialWithoutContinuations) {
  // Draft 0.1 ms per token next to a 10 ms verify: splitting doubles the verify cost.
  PipelineModeSelector selector({0.05, 0, 0.02});
  const PipelineDecision d = selector.Choose(Inputs(8, 4, {0.2, 0.01}));
  EXPECT_EQ(d.mode, PipelineMode::kSequential);
  EXPECT_DOUBLE_EQ(d.predicted_gain, 0);
}

TEST(PipelineModeTest, ExpensiveDraftEngagesPingPongWithItsGain) {
  // Draft of a half (8 * 4 tokens * 0.5 ms = 17 ms) outweighs the verify of a half.
  PipelineModeSelector selector({0.05, 0, 0.02});
  const PipelineDecision d = selector.Choose(Inputs(16, 4));
  ASSERT_EQ(d.mode, PipelineMode::kPingPong);
  EXPECT_NEAR(d.predicted_gain, d.prediction.sequential_ms / d.prediction.ping_pong_ms - 1, 1e-12);
  EXPECT_GT(d.predicted_gain, 0.2);
}

TEST(PipelineModeTest, ContinuationHitsMakeLockstepPay) {
  PipelineInputs in = Inputs(2, 4);
  in.continuations = true;
  in.hit_rate = 0.6;
  PipelineModeSelector selector({0.05, 0, 0.02});
  EXPECT_EQ(selector.Choose(in).mode, PipelineMode::kLockstep);
  in.hit_rate = 0;  // No hits: a continuation only costs; lockstep is no better.
  EXPECT_EQ(PipelineModeSelector({0.05, 0, 0.02}).Choose(in).mode, PipelineMode::kSequential);
}

TEST(PipelineModeTest, OverlapSlowdownsStretchTheOverlappedCalls) {
  PipelineInputs in = Inputs(4, 3);
  in.continuations = true;
  in.hit_rate = 0.5;
  in.verify_slowdown = 1.5;
  in.draft_slowdown = 2;
  const PipelinePrediction p = PredictRoundTimes(in);
  const double verify = 10 + 0.1 * 16, draft = 1 + 0.5 * 12;
  EXPECT_DOUBLE_EQ(p.sequential_ms, draft + verify);  // Nothing overlaps.
  // Continuations: 2 * 9 ms against 1.5 * 11.6 ms.
  EXPECT_DOUBLE_EQ(p.lockstep_ms, std::max(1.5 * verify, 2 * 9.0) + 0.5 * draft);
  // Halves of 2: 1.5 * 10.8 against 2 * 4.
  EXPECT_DOUBLE_EQ(p.ping_pong_ms, 2 * 1.5 * 10.8);
  in.verify_slowdown = 0.5;  // Below 1 counts as 1.
  in.draft_slowdown = 0.5;
  const PipelinePrediction q = PredictRoundTimes(in);
  EXPECT_DOUBLE_EQ(q.lockstep_ms, verify + 0.5 * draft);
}

TEST(PipelineModeTest, ContentionForCoresTurnsAPayingOverlapSequential) {
  // Ping-pong pays with free overlap (see ExpensiveDraftEngagesPingPongWithItsGain),
  // but not when both calls slow down by half while they share cores.
  PipelineInputs in = Inputs(16, 4);
  EXPECT_EQ(PipelineModeSelector({0.05, 0, 0.02}).Choose(in).mode, PipelineMode::kPingPong);
  in.verify_slowdown = 1.8;
  in.draft_slowdown = 1.8;
  EXPECT_EQ(PipelineModeSelector({0.05, 0, 0.02}).Choose(in).mode, PipelineMode::kSequential);
}

TEST(PipelineModeTest, NothingToOverlapIsSequential) {
  PipelineModeSelector selector({0.05, 0, 0.02});
  EXPECT_EQ(selector.Choose(Inputs(16, 4)).mode, PipelineMode::kPingPong);
  EXPECT_EQ(selector.Choose(Inputs(16, 0)).mode, PipelineMode::kSequential);
  EXPECT_EQ(selector.Choose(Inputs(0, 4)).mode, PipelineMode::kSequential);
}

TEST(PipelineModeTest, HoldsAModeForTheMinimumPhases) {
  PipelineModeSelector selector({0.05, 3, 0.02});
  // Expensive draft at 16: ping-pong gains; but the sequential incumbent is no loss, so
  // it waits for its hold to pass (it held 0, 1, 2 phases before these calls).
  EXPECT_EQ(selector.Choose(Inputs(16, 4)).mode, PipelineMode::kSequential);
  EXPECT_EQ(selector.Choose(Inputs(16, 4)).mode, PipelineMode::kSequential);
  EXPECT_EQ(selector.Choose(Inputs(16, 4)).mode, PipelineMode::kSequential);
  EXPECT_EQ(selector.Choose(Inputs(16, 4)).mode, PipelineMode::kPingPong);
  // Drafting gets cheaper: ping-pong is now a modelled loss and is left at once.
  EXPECT_EQ(selector.Choose(Inputs(16, 4, {0.2, 0.01})).mode, PipelineMode::kSequential);
}

TEST(PipelineModeTest, AGainBelowTheMinimumIsLeftAtOnce) {
  // Lockstep with continuations, verify 11 ms, draft 5 ms a round: the gain is h * 5 ms.
  PipelineInputs in = Inputs(2, 4);
  in.continuations = true;
  in.hit_rate = 0.5;  // Round 13.5 ms against 16: 18.5 % gain.
  PipelineModeSelector selector({0.05, 100, 0.02});
  // Leaving sequential waits for its hold (sequential is always eligible).
  EXPECT_EQ(selector.Choose(in).mode, PipelineMode::kSequential);
  PipelineModeSelector eager({0.05, 0, 0.02});
  EXPECT_EQ(eager.Choose(in).mode, PipelineMode::kLockstep);
  // Hits vanish (h = 0.04: a 1.25 % gain, under min_gain): back to sequential at once
  // although lockstep is still no slower than sequential.
  in.hit_rate = 0.04;
  const PipelineDecision d = eager.Choose(in);
  EXPECT_LT(d.prediction.lockstep_ms, d.prediction.sequential_ms);
  EXPECT_EQ(d.mode, PipelineMode::kSequential);
}

TEST(PipelineModeTest, SmallGainsDoNotSwitch) {
  // Ping-pong about 2 % faster than sequential: under the 5 % margin.
  PipelineInputs in = Inputs(2, 4, {0.0, 1.0});
  in.verify = {10.0, 0.0};
  // Sequential 8 + 10 = 18; ping-pong 2 * max(10, 4) = 20: sequential.
  PipelineModeSelector selector({0.05, 0, 0.02});
  EXPECT_EQ(selector.Choose(in).mode, PipelineMode::kSequential);
  in.draft = {0.0, 1.3};  // Sequential 20.4, ping-pong 20: 2 % gain.
  EXPECT_EQ(selector.Choose(in).mode, PipelineMode::kSequential);
  in.draft = {0.0, 2.0};  // Sequential 26, ping-pong 20: 30 % gain.
  EXPECT_EQ(selector.Choose(in).mode, PipelineMode::kPingPong);
  EXPECT_STREQ(PipelineModeLabel(selector.mode()), "ping_pong");
}

}  // namespace
}  // namespace tandem::coordinator
