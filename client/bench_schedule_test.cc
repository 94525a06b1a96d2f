#include "client/bench_schedule.h"

#include <gtest/gtest.h>

namespace tandem::client {
namespace {

constexpr auto kNone = v1::SPECULATION_METHOD_NONE;
constexpr auto kDraft = v1::SPECULATION_METHOD_DRAFT;
constexpr auto kLookup = v1::SPECULATION_METHOD_PROMPT_LOOKUP;
const std::vector<v1::AcceptanceRule> kDefaultRule = {v1::ACCEPTANCE_RULE_DEFAULT};

TEST(BenchConfigsTest, NoneOncePerConcurrencyOthersPerPipeliningMode) {
  std::vector<ConfigKey> c =
      BenchConfigs({kNone, kDraft}, kDefaultRule, {v1::PIPELINING_ON, v1::PIPELINING_OFF}, {1, 4});
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0].method, kNone);
  EXPECT_EQ(c[0].pipelining, v1::PIPELINING_DEFAULT);
  EXPECT_EQ(c[1].concurrency, 4);
  EXPECT_EQ(c[2].method, kDraft);
  EXPECT_EQ(c[2].pipelining, v1::PIPELINING_ON);
  EXPECT_EQ(c[2].concurrency, 1);
  EXPECT_EQ(c[4].pipelining, v1::PIPELINING_OFF);
  EXPECT_EQ(c[5].concurrency, 4);
}

TEST(BenchConfigsTest, SeveralTreeBudgetsMakeOneDraftRowEach) {
  const std::vector<ConfigKey> c =
      BenchConfigs({kNone, kDraft, kLookup}, kDefaultRule, {v1::PIPELINING_DEFAULT}, {1, 4},
                   /*aa_control=*/false, {kServerTreeNodes, 0});
  // none x 2 levels, draft x 2 budgets x 2 levels, prompt lookup x 2 levels.
  ASSERT_EQ(c.size(), 8u);
  EXPECT_FALSE(c[0].tree_nodes.has_value());
  EXPECT_EQ(ConfigLabel(c[2]), "draft tree=server");
  EXPECT_EQ(c[3].concurrency, 4);
  EXPECT_EQ(ConfigLabel(c[4]), "draft tree=0");
  EXPECT_FALSE(c[2] == c[4]);
  EXPECT_EQ(ConfigLabel(c[6]), "prompt_lookup");
  // One budget is a setting of every draft row, not a row of its own.
  const std::vector<ConfigKey> one =
      BenchConfigs({kDraft}, kDefaultRule, {v1::PIPELINING_DEFAULT}, {1}, false, {0});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(ConfigLabel(one[0]), "draft");
}

TEST(BenchConfigsTest, EveryRuleForEveryMethodNoneIncluded) {
  const auto kCoupled = v1::ACCEPTANCE_RULE_COUPLED;
  const auto kRejection = v1::ACCEPTANCE_RULE_REJECTION;
  std::vector<ConfigKey> c = BenchConfigs({kNone, kDraft}, {kCoupled, kRejection},
                                          {v1::PIPELINING_ON, v1::PIPELINING_OFF}, {1});
  // none x 2 rules (pipelining once), draft x 2 rules x 2 modes.
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0].rule, kCoupled);
  EXPECT_EQ(c[1].method, kNone);
  EXPECT_EQ(c[1].rule, kRejection);
  EXPECT_EQ(c[2].method, kDraft);
  EXPECT_EQ(c[2].rule, kCoupled);
  EXPECT_EQ(c[3].rule, kCoupled);
  EXPECT_EQ(c[3].pipelining, v1::PIPELINING_OFF);
  EXPECT_EQ(c[4].rule, kRejection);
  EXPECT_FALSE(c[0] == c[1]);  // The rule is part of the key.
  // Every rule takes part in every round.
  std::vector<ScheduledRun> s = InterleavedSchedule(c, 2);
  ASSERT_EQ(s.size(), 12u);
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].config, static_cast<int>(i < 6 ? i : 11 - i)) << i;  // Second round reversed.
  }
}

TEST(InterleavedScheduleTest, RoundsAlternateTheOrderAndCoverEveryConfigOnce) {
  std::vector<ConfigKey> configs =
      BenchConfigs({kNone, kDraft, kLookup}, kDefaultRule, {v1::PIPELINING_DEFAULT}, {1});  // A B C
  std::vector<ScheduledRun> s = InterleavedSchedule(configs, 4);
  ASSERT_EQ(s.size(), 12u);
  // A B C, C B A, A B C, C B A: never A A A B B B, and A is not always first.
  const std::vector<int> expected = {0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0};
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(s[i].round, i / 3) << i;
    EXPECT_EQ(s[i].config, expected[i]) << i;
  }
  // Over a pair of rounds every configuration has the same mean position.
  std::vector<int> position_sum(3, 0);
  for (int i = 0; i < 6; ++i) position_sum[s[i].config] += i % 3;
  EXPECT_EQ(position_sum, std::vector<int>({2, 2, 2}));
}

TEST(InterleavedScheduleTest, GroupsByConcurrencySoNoneRunsNextToItsComparisons) {
  std::vector<ConfigKey> configs =
      BenchConfigs({kNone, kDraft}, kDefaultRule, {v1::PIPELINING_DEFAULT}, {1, 4});
  // Display order: none c1, none c4, draft c1, draft c4 -> run order of the first
  // round: none c1, draft c1, none c4, draft c4; the second reverses each group.
  std::vector<ScheduledRun> s = InterleavedSchedule(configs, 2);
  ASSERT_EQ(s.size(), 8u);
  const std::vector<int> expected = {0, 2, 1, 3, 2, 0, 3, 1};
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].config, expected[i]) << i;
    EXPECT_EQ(s[i].round, static_cast<int>(i) / 4) << i;
  }
}

TEST(InterleavedScheduleTest, ChunksAlternateInsideAGroupAndCoverEveryRequestOnce) {
  const std::vector<ConfigKey> configs =
      BenchConfigs({kNone, kDraft}, kDefaultRule, {v1::PIPELINING_DEFAULT}, {1, 4});
  // Groups: c1 = {0, 2}, c4 = {1, 3}; 3 chunks a round: A1 B1 B2 A2 A3 B3 per group, and
  // the next round starts reversed (pass 3 is odd).
  const std::vector<ScheduledRun> s = InterleavedSchedule(configs, 2, 3);
  ASSERT_EQ(s.size(), 24u);
  const std::vector<int> config = {0, 2, 2, 0, 0, 2, 1, 3, 3, 1, 1, 3};
  const std::vector<int> chunk = {0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2};
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(s[i].round, 0) << i;
    EXPECT_EQ(s[i].config, config[i]) << i;
    EXPECT_EQ(s[i].chunk, chunk[i]) << i;
  }
  EXPECT_EQ(s[12].round, 1);
  EXPECT_EQ(s[12].config, 2);  // Pass 3: reversed.
  // One chunk is the old schedule.
  const std::vector<ScheduledRun> whole = InterleavedSchedule(configs, 2, 1);
  const std::vector<ScheduledRun> plain = InterleavedSchedule(configs, 2);
  ASSERT_EQ(whole.size(), plain.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(whole[i].config, plain[i].config);
  // The chunks of 10 requests in 3: 4 + 3 + 3, numbers 0-3, 4-6, 7-9.
  int first = -1, count = -1;
  ChunkRequests(10, 3, 0, &first, &count);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(count, 4);
  ChunkRequests(10, 3, 2, &first, &count);
  EXPECT_EQ(first, 7);
  EXPECT_EQ(count, 3);
  ChunkRequests(10, 1, 0, &first, &count);
  EXPECT_EQ(count, 10);
}

TEST(BenchConfigsTest, AaControlFollowsEachRulesNoneRows) {
  const auto kCoupled = v1::ACCEPTANCE_RULE_COUPLED;
  const auto kRejection = v1::ACCEPTANCE_RULE_REJECTION;
  std::vector<ConfigKey> c =
      BenchConfigs({kNone, kDraft}, {kCoupled, kRejection}, {v1::PIPELINING_ON}, {1, 4}, true);
  // Per rule: none c1, none c4, A/A c1, A/A c4; then draft x 2 rules x 2 levels.
  ASSERT_EQ(c.size(), 12u);
  for (int i : {2, 3, 6, 7}) {
    EXPECT_TRUE(c[i].aa_control) << i;
    EXPECT_EQ(c[i].method, kNone) << i;
    EXPECT_EQ(c[i].pipelining, v1::PIPELINING_DEFAULT) << i;
  }
  EXPECT_EQ(c[2].concurrency, 1);
  EXPECT_EQ(c[3].concurrency, 4);
  EXPECT_EQ(c[2].rule, kCoupled);
  EXPECT_EQ(c[6].rule, kRejection);
  for (int i : {0, 1, 4, 5, 8, 9, 10, 11}) EXPECT_FALSE(c[i].aa_control) << i;
  EXPECT_FALSE(c[0] == c[2]);  // Same request, but a configuration of its own.
  EXPECT_EQ(ConfigLabel(c[0]), "none");
  EXPECT_EQ(ConfigLabel(c[2]), "none (A/A)");
  EXPECT_EQ(ConfigLabel(c[8]), "draft");
  // Without `none` there is nothing to control.
  EXPECT_EQ(BenchConfigs({kDraft}, kDefaultRule, {v1::PIPELINING_DEFAULT}, {1}, true).size(), 1u);
}

TEST(InterleavedScheduleTest, AaControlIsInterleavedAtTheFarEndFromNone) {
  std::vector<ConfigKey> configs =
      BenchConfigs({kNone, kDraft, kLookup}, kDefaultRule, {v1::PIPELINING_DEFAULT}, {1, 4}, true);
  // Display order: none c1 (0), none c4 (1), A/A c1 (2), A/A c4 (3), draft (4, 5),
  // prompt_lookup (6, 7). Each round measures every configuration once, grouped by
  // concurrency with the control at the end of its group, reversed in odd rounds.
  std::vector<ScheduledRun> s = InterleavedSchedule(configs, 3);
  const std::vector<int> round0 = {0, 4, 6, 2, 1, 5, 7, 3};
  const std::vector<int> round1 = {2, 6, 4, 0, 3, 7, 5, 1};
  ASSERT_EQ(s.size(), 24u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(s[i].config, round0[i]) << i;
    EXPECT_EQ(s[i + 8].config, round1[i]) << i;
    EXPECT_EQ(s[i + 16].config, round0[i]) << i;
    EXPECT_EQ(s[i + 8].round, 1) << i;
  }
}

TEST(InterleavedScheduleTest, AtLeastOneRound) {
  std::vector<ConfigKey> configs =
      BenchConfigs({kNone}, kDefaultRule, {v1::PIPELINING_DEFAULT}, {2});
  EXPECT_EQ(InterleavedSchedule(configs, 0).size(), 1u);
  EXPECT_TRUE(InterleavedSchedule({}, 3).empty());
}

}  // namespace
}  // namespace tandem::client
