#include "coordinator/planning_batch.h"

#include <gtest/gtest.h>

namespace tandem::coordinator {
namespace {

TEST(PlanningBatchTest, ARiseCountsAtOnce) {
  PlanningBatch b(3);
  EXPECT_EQ(b.Next(1), 1);
  EXPECT_EQ(b.Next(4), 4);
  EXPECT_EQ(b.Next(16), 16);
}

TEST(PlanningBatchTest, ADipBetweenRequestsIsNotAChangeOfLoad) {
  PlanningBatch b(3);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.Next(4), 4);
  EXPECT_EQ(b.Next(3), 4);  // One request finished, the next not yet admitted.
  EXPECT_EQ(b.Next(4), 4);
  EXPECT_EQ(b.Next(3), 4);
  EXPECT_EQ(b.Next(2), 4);  // Two phases short: still within the window.
  EXPECT_EQ(b.Next(4), 4);
}

TEST(PlanningBatchTest, ASustainedFallIsFollowedAfterTheWindow) {
  PlanningBatch b(3);
  b.Next(4);
  EXPECT_EQ(b.Next(1), 4);
  EXPECT_EQ(b.Next(1), 4);
  EXPECT_EQ(b.Next(1), 1);  // Three phases at 1: the load fell.
  EXPECT_EQ(b.Next(2), 2);
}

TEST(PlanningBatchTest, AWindowOfOneIsTheRunningCount) {
  PlanningBatch b(1);
  EXPECT_EQ(b.Next(4), 4);
  EXPECT_EQ(b.Next(3), 3);
  PlanningBatch clamped(0);
  EXPECT_EQ(clamped.Next(4), 4);
  EXPECT_EQ(clamped.Next(2), 2);
  EXPECT_EQ(clamped.Next(-3), 0);
}

}  // namespace
}  // namespace tandem::coordinator
