// The `local` backend: the conformance suite on in-process groups of 1, 2 and 4 ranks,
// missing and mismatched ranks, and the tp = 1 communicator.
#include "comm/local_communicator.h"

#include <gtest/gtest.h>

#include "comm/collective_checks.h"
#include "comm/communicator_conformance.h"

namespace tandem {
namespace {

using testing::CommunicatorConformanceTest;
using testing::GroupsOfOneTwoAndFour;

constexpr absl::Duration kTimeout = absl::Seconds(10);

// The suite's group factory: in-process ranks need no rendezvous.
std::vector<std::unique_ptr<Communicator>> CreateGroup(int size, Store& /*unused*/) {
  auto group = LocalGroup::Create(size);
  EXPECT_TRUE(group.ok()) << group.status();
  return group.ok() ? *std::move(group) : std::vector<std::unique_ptr<Communicator>>();
}

INSTANTIATE_TEST_SUITE_P(Local, CommunicatorConformanceTest,
                         ::testing::ValuesIn(GroupsOfOneTwoAndFour({"local", CreateGroup})));

TEST(LocalGroupTest, RankOrderMattersForTheseInputs) {
  // Guards the determinism checks: with these inputs a reverse-order sum differs, so
  // a backend that reduced in another order would be caught.
  const size_t count = 4096;
  std::vector<float> forward = testing::NaiveRankOrderSum(4, count, 2);
  std::vector<float> reverse = testing::MakeRankInput(3, count, 2);
  for (int r = 2; r >= 0; --r) {
    std::vector<float> x = testing::MakeRankInput(r, count, 2);
    for (size_t e = 0; e < count; ++e) reverse[e] += x[e];
  }
  EXPECT_FALSE(testing::BitwiseEqual(forward, reverse));
}

TEST(LocalGroupTest, MissingRankGivesDeadlineExceededForTheOthers) {
  auto group = LocalGroup::Create(4);
  ASSERT_TRUE(group.ok());
  const absl::Duration timeout = absl::Milliseconds(300);
  const auto outcomes = testing::AllReduceWithoutTheLastRank(*group, timeout);
  for (int r = 0; r < 3; ++r) {
    const absl::Status& status = outcomes[r].status;
    EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << "rank " << r << ": " << status;
    EXPECT_LT(outcomes[r].took, timeout + absl::Seconds(1)) << "rank " << r;
  }
  const absl::Status& first = outcomes[0].status;
  EXPECT_NE(first.message().find("rank(s) 3"), std::string::npos) << first;
  // The group is now broken: the late rank fails at once instead of waiting.
  float x = 1.0f;
  absl::Time start = absl::Now();
  absl::Status late = (*group)[3]->AllReduceSum(&x, 1, absl::Seconds(30));
  EXPECT_TRUE(absl::IsDeadlineExceeded(late)) << late;
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST(LocalGroupTest, MismatchedCallsFailOnEveryRank) {
  auto group = LocalGroup::Create(2);
  ASSERT_TRUE(group.ok());
  std::vector<absl::Status> statuses(2);
  testing::RunOnAllRanks(2, [&](int r) {
    std::vector<float> x(r == 0 ? 8 : 16, 1.0f);
    statuses[r] = (*group)[r]->AllReduceSum(x.data(), x.size(), kTimeout);
  });
  for (const absl::Status& s : statuses) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(s.message().find("disagree"), std::string::npos) << s;
  }
}

TEST(LocalGroupTest, BadArgumentsAreRejected) {
  auto single = CreateSingleRankCommunicator();
  EXPECT_TRUE(absl::IsInvalidArgument(single->AllReduceSum(nullptr, 4, kTimeout)));
  char byte = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(single->Broadcast(&byte, 1, 1, kTimeout)));
  EXPECT_TRUE(absl::IsInvalidArgument(single->Broadcast(&byte, 1, -1, kTimeout)));
  EXPECT_TRUE(absl::IsInvalidArgument(single->Barrier(absl::Seconds(-1))));
  EXPECT_TRUE(absl::IsInvalidArgument(LocalGroup::Create(0).status()));
}

TEST(LocalGroupTest, SingleRankCopiesAndKeepsData) {
  auto single = CreateSingleRankCommunicator();
  EXPECT_EQ(single->size(), 1);
  std::vector<float> x = {1.5f, -2.25f, 3.0f};
  std::vector<float> before = x;
  ASSERT_TRUE(single->AllReduceSum(x.data(), x.size(), kTimeout).ok());
  EXPECT_EQ(x, before);
  std::vector<float> out(3, 0.0f);
  ASSERT_TRUE(single->AllGather(x.data(), out.data(), sizeof(float) * 3, kTimeout).ok());
  EXPECT_EQ(out, before);
  ASSERT_TRUE(single->Broadcast(x.data(), sizeof(float) * 3, 0, kTimeout).ok());
  EXPECT_EQ(x, before);
  EXPECT_TRUE(single->Barrier(kTimeout).ok());
}

}  // namespace
}  // namespace tandem
