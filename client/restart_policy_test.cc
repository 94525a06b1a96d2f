#include "client/restart_policy.h"

#include <gtest/gtest.h>

namespace tandem::client {
namespace {

RestartPolicy Policy(int budget) {
  RestartPolicy p;
  p.budget = budget;
  p.window = absl::Seconds(60);
  p.backoff = absl::Milliseconds(500);
  p.max_backoff = absl::Seconds(3);
  return p;
}

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(RestartPolicyTest, ParsesModes) {
  EXPECT_EQ(*ParseRestartMode("never"), RestartMode::kNever);
  EXPECT_EQ(*ParseRestartMode("workers"), RestartMode::kWorkers);
  EXPECT_EQ(*ParseRestartMode("always"), RestartMode::kAlways);
  EXPECT_FALSE(ParseRestartMode("on-failure").ok());
  for (RestartMode m : {RestartMode::kNever, RestartMode::kWorkers, RestartMode::kAlways}) {
    EXPECT_EQ(*ParseRestartMode(RestartModeName(m)), m);
  }
}

TEST(RestartPolicyTest, Validation) {
  EXPECT_TRUE(ValidateRestartPolicy(Policy(5)).ok());
  EXPECT_FALSE(ValidateRestartPolicy(Policy(-1)).ok());
  RestartPolicy p = Policy(5);
  p.window = absl::ZeroDuration();
  EXPECT_FALSE(ValidateRestartPolicy(p).ok());
  p = Policy(5);
  p.max_backoff = absl::Milliseconds(100);  // Below backoff.
  EXPECT_FALSE(ValidateRestartPolicy(p).ok());
}

TEST(RestartPolicyTest, BackoffDoublesUpToTheCapThenBudgetIsSpent) {
  RestartTracker t(Policy(5));
  const absl::Duration expected[] = {absl::Milliseconds(500), absl::Seconds(1), absl::Seconds(2),
                                     absl::Seconds(3), absl::Seconds(3)};
  for (int i = 0; i < 5; ++i) {
    RestartTracker::Decision d = t.OnExit(kT0 + absl::Seconds(i), false);
    ASSERT_TRUE(d.restart) << i;
    EXPECT_EQ(d.delay, expected[i]) << i;
    EXPECT_EQ(d.restarts_in_window, i);
  }
  RestartTracker::Decision d = t.OnExit(kT0 + absl::Seconds(5), false);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.restarts_in_window, 5);
  EXPECT_EQ(t.total_restarts(), 5);
}

TEST(RestartPolicyTest, RestartsOutsideTheWindowNoLongerCount) {
  RestartTracker t(Policy(2));
  EXPECT_TRUE(t.OnExit(kT0, false).restart);
  EXPECT_TRUE(t.OnExit(kT0 + absl::Seconds(30), false).restart);
  EXPECT_FALSE(t.OnExit(kT0 + absl::Seconds(59), false).restart);  // Both still inside.
  // At t0 + 60 s the first restart leaves the window: one in it, the backoff shrinks.
  RestartTracker::Decision d = t.OnExit(kT0 + absl::Seconds(60), false);
  ASSERT_TRUE(d.restart);
  EXPECT_EQ(d.restarts_in_window, 1);
  EXPECT_EQ(d.delay, absl::Seconds(1));
  // A process that stays up longer than the window starts over at the first backoff.
  d = t.OnExit(kT0 + absl::Seconds(200), false);
  ASSERT_TRUE(d.restart);
  EXPECT_EQ(d.restarts_in_window, 0);
  EXPECT_EQ(d.delay, absl::Milliseconds(500));
  EXPECT_EQ(t.total_restarts(), 4);
}

TEST(RestartPolicyTest, ModesDecideWhoIsRestarted) {
  RestartPolicy never = Policy(5);
  never.mode = RestartMode::kNever;
  EXPECT_FALSE(RestartTracker(never).OnExit(kT0, false).restart);
  RestartPolicy workers = Policy(5);
  workers.mode = RestartMode::kWorkers;
  EXPECT_TRUE(RestartTracker(workers).OnExit(kT0, false).restart);
  EXPECT_FALSE(RestartTracker(workers).OnExit(kT0, true).restart);
  EXPECT_TRUE(RestartTracker(Policy(5)).OnExit(kT0, true).restart);
  EXPECT_FALSE(RestartTracker(Policy(0)).OnExit(kT0, false).restart);  // No budget at all.
}

}  // namespace
}  // namespace tandem::client
