#include "coordinator/draft_feed_budget.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem::coordinator {
namespace {

// A phase whose target verifies `verified` sequences.
PhasePlan TargetWork(int verified) {
  PhasePlan plan;
  for (int i = 0; i < verified; ++i) plan.verify.add_sequences();
  return plan;
}

TEST(HiddenDraftFeedTokensTest, CutToWhatOneTargetStepHidesInABatch) {
  PlannerOptions o;
  o.draft_max_batch_tokens = 512;
  WorkerAvailability w;
  w.draft_worker_feed_cost = 0.16;  // At n = 4: 25 tokens cost one plain target step.
  EXPECT_EQ(HiddenDraftFeedTokens(TargetWork(4), 4, o, w), 25);
  EXPECT_EQ(HiddenDraftFeedTokens(TargetWork(1), 1, o, w), 512);  // Alone: not cut.
  EXPECT_EQ(HiddenDraftFeedTokens(TargetWork(0), 4, o, w), 512);  // No target work.
  w.draft_worker_feed_cost = 2;  // Two tokens a step: still at least 16.
  EXPECT_EQ(HiddenDraftFeedTokens(TargetWork(4), 4, o, w), 16);
  w.draft_worker_feed_cost = 1e-9;  // Cheap: the worker's own limit.
  EXPECT_EQ(HiddenDraftFeedTokens(TargetWork(4), 4, o, w), 512);
  o.draft_max_batch_tokens = 8;  // Below the floor: the limit wins.
  w.draft_worker_feed_cost = 2;
  EXPECT_EQ(HiddenDraftFeedTokens(TargetWork(4), 4, o, w), 8);
}

TEST(HiddenDraftFeedTokensTest, NotCutWhileTheFeedCostIsUnknown) {
  PlannerOptions o;
  o.draft_max_batch_tokens = 300;
  WorkerAvailability w;
  for (double cost : {0.0, -1.0, std::nan("")}) {
    w.draft_worker_feed_cost = cost;
    EXPECT_EQ(HiddenDraftFeedTokens(TargetWork(4), 4, o, w), 300) << cost;
  }
}

}  // namespace
}  // namespace tandem::coordinator
