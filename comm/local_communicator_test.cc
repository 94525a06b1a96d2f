// The `local` backend: a single rank, and in-process groups of 2 and 4 ranks.
#include "comm/local_communicator.h"

#include <gtest/gtest.h>

#include "comm/collective_checks.h"

namespace tandem {
namespace {

using testing::RunOnAllRanks;

constexpr absl::Duration kTimeout = absl::Seconds(10);

std::vector<Communicator*> Raw(const std::vector<std::unique_ptr<Communicator>>& ranks) {
  std::vector<Communicator*> raw;
  for (const auto& r : ranks) raw.push_back(r.get());
  return raw;
}

class LocalGroupTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    auto group = LocalGroup::Create(GetParam());
    ASSERT_TRUE(group.ok()) << group.status();
    owned_ = *std::move(group);
    ranks_ = Raw(owned_);
  }
  std::vector<std::unique_ptr<Communicator>> owned_;
  std::vector<Communicator*> ranks_;
};

TEST_P(LocalGroupTest, ReportsRankSizeAndBackend) {
  for (int r = 0; r < GetParam(); ++r) {
    EXPECT_EQ(ranks_[r]->rank(), r);
    EXPECT_EQ(ranks_[r]->size(), GetParam());
    EXPECT_EQ(ranks_[r]->backend(), "local");
  }
}

TEST_P(LocalGroupTest, AllReduceIsRankOrderSum) {
  testing::ExpectAllReduceIsRankOrderSum(ranks_, 1, 1, kTimeout);
  testing::ExpectAllReduceIsRankOrderSum(ranks_, 4096, 2, kTimeout);
  testing::ExpectAllReduceIsRankOrderSum(ranks_, 10007, 3, kTimeout);
}

TEST_P(LocalGroupTest, AllReduceIsBatchInvariant) {
  testing::ExpectAllReduceBatchInvariant(ranks_, 10000, {0, 1, 1023, 1024, 9999}, 4, kTimeout);
}

TEST_P(LocalGroupTest, AllGather) {
  testing::ExpectAllGatherCorrect(ranks_, 1, kTimeout);
  testing::ExpectAllGatherCorrect(ranks_, 4099, kTimeout);
}

TEST_P(LocalGroupTest, Broadcast) {
  testing::ExpectBroadcastCorrect(ranks_, 1, kTimeout);
  testing::ExpectBroadcastCorrect(ranks_, 65537, kTimeout);
}

TEST_P(LocalGroupTest, Barrier) { testing::ExpectBarrierSynchronizes(ranks_, 4, kTimeout); }

TEST_P(LocalGroupTest, ZeroSizedCallsSucceed) {
  RunOnAllRanks(GetParam(), [&](int r) {
    EXPECT_TRUE(ranks_[r]->AllReduceSum(nullptr, 0, kTimeout).ok());
    EXPECT_TRUE(ranks_[r]->AllGather(nullptr, nullptr, 0, kTimeout).ok());
    EXPECT_TRUE(ranks_[r]->Broadcast(nullptr, 0, 0, kTimeout).ok());
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, LocalGroupTest, ::testing::Values(1, 2, 4));

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
  std::vector<absl::Status> statuses(4);
  std::vector<absl::Duration> took(4);
  RunOnAllRanks(3, [&](int r) {  // rank 3 never calls
    float x = 1.0f;
    absl::Time start = absl::Now();
    statuses[r] = (*group)[r]->AllReduceSum(&x, 1, timeout);
    took[r] = absl::Now() - start;
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(statuses[r])) << "rank " << r << ": " << statuses[r];
    EXPECT_LT(took[r], timeout + absl::Seconds(1)) << "rank " << r;
  }
  EXPECT_NE(statuses[0].message().find("rank(s) 3"), std::string::npos) << statuses[0];
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
  RunOnAllRanks(2, [&](int r) {
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
