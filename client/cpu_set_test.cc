#include "client/cpu_set.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace tandem::client {
namespace {

using ::testing::ElementsAre;

TEST(CpuListTest, ParsesRangesAndSingles) {
  auto cpus = ParseCpuList(" 8,0-2, 5 ,1");
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_THAT(*cpus, ElementsAre(0, 1, 2, 5, 8));
  auto empty = ParseCpuList("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(CpuListTest, RejectsGarbage) {
  for (const char* bad : {"a", "1-", "3-1", "-1", "1,,2", "0-99999"}) {
    EXPECT_FALSE(ParseCpuList(bad).ok()) << bad;
  }
}

TEST(CpuListTest, FormatRoundTrips) {
  const std::vector<int> cpus = {0, 1, 2, 5, 7, 8};
  EXPECT_EQ(FormatCpuList(cpus), "0-2,5,7-8");
  auto back = ParseCpuList(FormatCpuList(cpus));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, cpus);
  EXPECT_EQ(FormatCpuList({}), "");
}

TEST(AllowedCpusTest, ReportsAtLeastOneCpu) { EXPECT_FALSE(AllowedCpus().empty()); }

TEST(PlanAffinityTest, TwoCoresPutDraftAndTargetGroupOnOneEach) {
  auto plan = PlanAffinity({0, 1}, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->draft, ElementsAre(0));
  ASSERT_EQ(plan->target_ranks.size(), 4u);
  for (const auto& rank : plan->target_ranks) EXPECT_THAT(rank, ElementsAre(1));
}

TEST(PlanAffinityTest, ManyCoresAreSplitDisjointlyAndCompletely) {
  std::vector<int> cpus;
  for (int c = 0; c < 16; ++c) cpus.push_back(c);
  auto plan = PlanAffinity(cpus, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->draft.size(), 3u);  // 16 / 5
  std::set<int> seen(plan->draft.begin(), plan->draft.end());
  size_t total = plan->draft.size();
  size_t smallest = 99, largest = 0;
  for (const auto& rank : plan->target_ranks) {
    total += rank.size();
    smallest = std::min(smallest, rank.size());
    largest = std::max(largest, rank.size());
    seen.insert(rank.begin(), rank.end());
  }
  EXPECT_EQ(total, 16u);        // Nothing shared ...
  EXPECT_EQ(seen.size(), 16u);  // ... and nothing left out.
  EXPECT_LE(largest - smallest, 1u);
}

TEST(PlanAffinityTest, NeedsTwoCores) {
  EXPECT_FALSE(PlanAffinity({3}, 4).ok());
  EXPECT_FALSE(PlanAffinity({0, 1}, 0).ok());
}

TEST(PlanAffinityFromTest, ExplicitListsMustBeDisjoint) {
  EXPECT_FALSE(PlanAffinityFrom({0, 1}, {1, 2}, 2).ok());
  EXPECT_FALSE(PlanAffinityFrom({}, {1, 2}, 2).ok());
  auto plan = PlanAffinityFrom({0}, {1, 2, 3}, 2);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->target_ranks, ElementsAre(ElementsAre(1, 2), ElementsAre(3)));
}

}  // namespace
}  // namespace tandem::client
