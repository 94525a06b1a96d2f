// The `gloo` backend with 1, 2 and 4 ranks in one process (one thread and one
// Communicator per rank, real TCP over loopback), rendezvous through the in-memory and
// the file store.
#include "comm/gloo_communicator.h"

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "comm/collective_checks.h"
#include "comm/file_store.h"

namespace tandem {
namespace {

using testing::RunOnAllRanks;

constexpr absl::Duration kTimeout = absl::Seconds(10);

GlooOptions LoopbackOptions() {
  GlooOptions options;
  options.hostname = "127.0.0.1";
  options.connect_timeout = absl::Seconds(10);
  return options;
}

// Connects `size` ranks concurrently through `store`.
std::vector<std::unique_ptr<Communicator>> ConnectGroup(int size, Store& store) {
  std::vector<std::unique_ptr<Communicator>> ranks(static_cast<size_t>(size));
  RunOnAllRanks(size, [&](int r) {
    auto comm = CreateGlooCommunicator(r, size, store, LoopbackOptions());
    ASSERT_TRUE(comm.ok()) << "rank " << r << ": " << comm.status();
    ranks[r] = *std::move(comm);
  });
  return ranks;
}

std::vector<Communicator*> Raw(const std::vector<std::unique_ptr<Communicator>>& ranks) {
  std::vector<Communicator*> raw;
  for (const auto& r : ranks) raw.push_back(r.get());
  return raw;
}

class GlooGroupTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    static int run = 0;
    store_ = std::make_unique<PrefixStore>(std::make_shared<InMemoryStore>(),
                                           absl::StrCat("run", ++run));
    owned_ = ConnectGroup(GetParam(), *store_);
    for (const auto& r : owned_) ASSERT_NE(r, nullptr);
    ranks_ = Raw(owned_);
  }
  std::unique_ptr<Store> store_;
  std::vector<std::unique_ptr<Communicator>> owned_;
  std::vector<Communicator*> ranks_;
};

TEST_P(GlooGroupTest, ReportsRankSizeAndBackend) {
  for (int r = 0; r < GetParam(); ++r) {
    EXPECT_EQ(ranks_[r]->rank(), r);
    EXPECT_EQ(ranks_[r]->size(), GetParam());
    EXPECT_EQ(ranks_[r]->backend(), "gloo");
  }
}

TEST_P(GlooGroupTest, AllReduceIsRankOrderSum) {
  testing::ExpectAllReduceIsRankOrderSum(ranks_, 1, 1, kTimeout);
  testing::ExpectAllReduceIsRankOrderSum(ranks_, 4096, 2, kTimeout);
  testing::ExpectAllReduceIsRankOrderSum(ranks_, 100003, 3, kTimeout);
}

TEST_P(GlooGroupTest, AllReduceIsBatchInvariantAndRepeatable) {
  testing::ExpectAllReduceBatchInvariant(ranks_, 10000, {0, 1, 4097, 9999}, 4, kTimeout);
  // Same inputs again: bitwise the same result.
  std::vector<std::vector<float>> first(ranks_.size()), second(ranks_.size());
  for (auto* out : {&first, &second}) {
    RunOnAllRanks(GetParam(), [&](int r) {
      (*out)[r] = testing::MakeRankInput(r, 50000, 5);
      EXPECT_TRUE(ranks_[r]->AllReduceSum((*out)[r].data(), 50000, kTimeout).ok());
    });
  }
  for (int r = 0; r < GetParam(); ++r) EXPECT_TRUE(testing::BitwiseEqual(first[r], second[r]));
}

TEST_P(GlooGroupTest, AllGather) {
  testing::ExpectAllGatherCorrect(ranks_, 1, kTimeout);
  testing::ExpectAllGatherCorrect(ranks_, 70001, kTimeout);
}

TEST_P(GlooGroupTest, Broadcast) {
  testing::ExpectBroadcastCorrect(ranks_, 3, kTimeout);
  testing::ExpectBroadcastCorrect(ranks_, 65536, kTimeout);
}

TEST_P(GlooGroupTest, Barrier) { testing::ExpectBarrierSynchronizes(ranks_, 3, kTimeout); }

INSTANTIATE_TEST_SUITE_P(Sizes, GlooGroupTest, ::testing::Values(1, 2, 4));

TEST(GlooTest, ConnectsThroughTheFileStore) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  auto files = FileStore::CreateFresh(tmp != nullptr ? tmp : "/tmp");
  ASSERT_TRUE(files.ok()) << files.status();
  PrefixStore store(std::shared_ptr<Store>(std::move(*files)), "filerun");
  auto owned = ConnectGroup(3, store);
  for (const auto& r : owned) ASSERT_NE(r, nullptr);
  testing::ExpectAllReduceIsRankOrderSum(Raw(owned), 4096, 6, kTimeout);
}

TEST(GlooTest, MissingPeerAtConnectGivesDeadlineExceeded) {
  PrefixStore store(std::make_shared<InMemoryStore>(), "lonely");
  GlooOptions options = LoopbackOptions();
  options.connect_timeout = absl::Milliseconds(300);
  absl::Time start = absl::Now();
  auto comm = CreateGlooCommunicator(0, 2, store, options);
  EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status())) << comm.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST(GlooTest, PeerThatStopsCallingMakesOthersTimeOut) {
  PrefixStore store(std::make_shared<InMemoryStore>(), "stall");
  auto owned = ConnectGroup(3, store);
  for (const auto& r : owned) ASSERT_NE(r, nullptr);
  const absl::Duration timeout = absl::Milliseconds(400);
  std::vector<absl::Status> statuses(2);
  std::vector<absl::Duration> took(2);
  RunOnAllRanks(2, [&](int r) {  // rank 2 never calls
    std::vector<float> x(16, 1.0f);
    absl::Time start = absl::Now();
    statuses[r] = owned[r]->AllReduceSum(x.data(), x.size(), timeout);
    took[r] = absl::Now() - start;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(statuses[r])) << "rank " << r << ": " << statuses[r];
    EXPECT_LT(took[r], timeout + absl::Seconds(2)) << "rank " << r;
    // Broken from now on: fails at once.
    absl::Time start = absl::Now();
    EXPECT_FALSE(owned[r]->Barrier(absl::Seconds(30)).ok());
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
  }
}

TEST(GlooTest, BadArgumentsAreRejectedWithoutTouchingPeers) {
  PrefixStore store(std::make_shared<InMemoryStore>(), "args");
  EXPECT_TRUE(absl::IsInvalidArgument(
      CreateGlooCommunicator(2, 2, store, LoopbackOptions()).status()));
  GlooOptions bad_iface = LoopbackOptions();
  bad_iface.interface = "no-such-interface0";
  EXPECT_TRUE(absl::IsInvalidArgument(CreateGlooCommunicator(0, 1, store, bad_iface).status()));
  auto single = CreateGlooCommunicator(0, 1, store, LoopbackOptions());
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_TRUE(absl::IsInvalidArgument((*single)->AllReduceSum(nullptr, 3, kTimeout)));
  char byte = 0;
  EXPECT_TRUE(absl::IsInvalidArgument((*single)->Broadcast(&byte, 1, 5, kTimeout)));
  // Still usable: argument errors do not break the communicator.
  float x = 2.5f;
  EXPECT_TRUE((*single)->AllReduceSum(&x, 1, kTimeout).ok());
  EXPECT_EQ(x, 2.5f);
}

}  // namespace
}  // namespace tandem
