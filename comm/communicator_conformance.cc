#include "comm/communicator_conformance.h"

#include <cstdlib>

#include "comm/collective_checks.h"
#include "comm/file_store.h"

namespace tandem::testing {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(10);

std::vector<Communicator*> Pointers(const std::vector<std::unique_ptr<Communicator>>& ranks) {
  std::vector<Communicator*> pointers;
  for (const auto& r : ranks) pointers.push_back(r.get());
  return pointers;
}

}  // namespace

void PrintTo(const ConformanceGroup& group, std::ostream* os) {
  *os << group.size << " " << group.factory.backend << " rank" << (group.size == 1 ? "" : "s");
}

std::vector<ConformanceGroup> GroupsOfOneTwoAndFour(const GroupFactory& factory) {
  return {{factory, 1}, {factory, 2}, {factory, 4}};
}

void CommunicatorConformanceTest::SetUp() {
  InMemoryStore store;
  owned_ = GetParam().factory.connect(size(), store);
  ASSERT_EQ(owned_.size(), static_cast<size_t>(size()));
  for (const auto& r : owned_) ASSERT_NE(r, nullptr);
  ranks_ = Pointers(owned_);
}

std::vector<std::unique_ptr<Communicator>> CreateRanksConcurrently(
    int size,
    const std::function<absl::StatusOr<std::unique_ptr<Communicator>>(int rank)>& create) {
  std::vector<std::unique_ptr<Communicator>> ranks(static_cast<size_t>(size));
  RunOnAllRanks(size, [&](int r) {
    auto comm = create(r);
    if (comm.ok()) {
      ranks[r] = *std::move(comm);
    } else {
      ADD_FAILURE() << "rank " << r << ": " << comm.status();
    }
  });
  return ranks;
}

void ExpectConnectsThroughAFileStore(const ConnectGroupFn& connect) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  auto files = FileStore::CreateFresh(tmp != nullptr ? tmp : "/tmp");
  ASSERT_TRUE(files.ok()) << files.status();
  PrefixStore store(std::shared_ptr<Store>(std::move(*files)), "filerun");
  auto owned = connect(3, store);
  for (const auto& r : owned) ASSERT_NE(r, nullptr);
  ExpectAllReduceIsRankOrderSum(Pointers(owned), 4096, 6, kTimeout);
}

namespace {

TEST_P(CommunicatorConformanceTest, ReportsRankSizeAndBackend) {
  for (int r = 0; r < size(); ++r) {
    EXPECT_EQ(ranks_[r]->rank(), r);
    EXPECT_EQ(ranks_[r]->size(), size());
    EXPECT_EQ(ranks_[r]->backend(), GetParam().factory.backend);
  }
}

TEST_P(CommunicatorConformanceTest, AllReduceIsRankOrderSum) {
  uint32_t seed = 1;
  for (size_t count : {1, 4096, 10007, 100003}) {
    ExpectAllReduceIsRankOrderSum(ranks_, count, seed++, kTimeout);
  }
}

TEST_P(CommunicatorConformanceTest, AllReduceIsBatchInvariantAndRepeatable) {
  ExpectAllReduceBatchInvariant(ranks_, 10000, {0, 1, 1023, 1024, 4097, 9999}, 4, kTimeout);
  // Same inputs again: bitwise the same result.
  std::vector<std::vector<float>> first(ranks_.size()), second(ranks_.size());
  for (auto* out : {&first, &second}) {
    RunOnAllRanks(size(), [&](int r) {
      (*out)[r] = MakeRankInput(r, 50000, 5);
      EXPECT_TRUE(ranks_[r]->AllReduceSum((*out)[r].data(), 50000, kTimeout).ok());
    });
  }
  for (int r = 0; r < size(); ++r) EXPECT_TRUE(BitwiseEqual(first[r], second[r]));
}

TEST_P(CommunicatorConformanceTest, AllGather) {
  for (size_t bytes : {1, 4099, 70001}) ExpectAllGatherCorrect(ranks_, bytes, kTimeout);
}

TEST_P(CommunicatorConformanceTest, Broadcast) {
  for (size_t bytes : {1, 3, 65536, 65537}) ExpectBroadcastCorrect(ranks_, bytes, kTimeout);
}

TEST_P(CommunicatorConformanceTest, Barrier) { ExpectBarrierSynchronizes(ranks_, 4, kTimeout); }

TEST_P(CommunicatorConformanceTest, ZeroSizedCallsSucceed) {
  RunOnAllRanks(size(), [&](int r) {
    EXPECT_TRUE(ranks_[r]->AllReduceSum(nullptr, 0, kTimeout).ok());
    EXPECT_TRUE(ranks_[r]->AllGather(nullptr, nullptr, 0, kTimeout).ok());
    EXPECT_TRUE(ranks_[r]->Broadcast(nullptr, 0, 0, kTimeout).ok());
  });
}

// 4 MiB per rank in every direction at once: the sends fill the socket buffers long
// before the receivers drain them, so a blocking send-then-receive would deadlock.
TEST_P(CommunicatorConformanceTest, LargeMessagesDoNotDeadlock) {
  constexpr size_t kFloats = size_t{1} << 20;
  ExpectAllReduceIsRankOrderSum(ranks_, kFloats, 11, kTimeout);
  ExpectAllGatherCorrect(ranks_, kFloats * sizeof(float), kTimeout);
  ExpectBroadcastCorrect(ranks_, kFloats * sizeof(float), kTimeout);
}

TEST_P(CommunicatorConformanceTest, BadArgumentsFailWithoutTouchingPeers) {
  for (Communicator* rank : ranks_) {  // one rank at a time: no peer takes part
    char byte = 0;
    EXPECT_TRUE(absl::IsInvalidArgument(rank->AllReduceSum(nullptr, 3, kTimeout)));
    EXPECT_TRUE(absl::IsInvalidArgument(rank->AllGather(&byte, nullptr, 1, kTimeout)));
    EXPECT_TRUE(absl::IsInvalidArgument(rank->Broadcast(&byte, 1, size(), kTimeout)));
    EXPECT_TRUE(absl::IsInvalidArgument(rank->Broadcast(&byte, 1, -1, kTimeout)));
    EXPECT_TRUE(absl::IsInvalidArgument(rank->Barrier(absl::Seconds(-1))));
  }
  // Still usable: argument errors do not break the communicator.
  ExpectAllReduceIsRankOrderSum(ranks_, 7, 12, kTimeout);
}

}  // namespace
}  // namespace tandem::testing
