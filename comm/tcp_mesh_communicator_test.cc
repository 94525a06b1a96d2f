// The `tcp` backend with 1, 2 and 4 ranks in one process (one thread and one
// Communicator per rank, real TCP over loopback): the conformance suite, the same bits
// as the local and gloo backends, timeouts, peers that go away, ranks out of step, and
// refused hellos.
#include "comm/tcp_mesh_communicator.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/collective_checks.h"
#include "comm/communicator_conformance.h"
#include "comm/gloo_communicator.h"
#include "comm/local_communicator.h"

namespace tandem {
namespace {

using testing::CommunicatorConformanceTest;
using testing::GroupsOfOneTwoAndFour;
using testing::RunOnAllRanks;

constexpr absl::Duration kTimeout = absl::Seconds(10);

TcpMeshOptions LoopbackOptions(const std::string& run_id = "test-run") {
  TcpMeshOptions options;
  options.hostname = "127.0.0.1";
  options.connect_timeout = absl::Seconds(10);
  options.run_id = run_id;
  return options;
}

std::unique_ptr<Store> FreshStore() {
  static int run = 0;
  return std::make_unique<PrefixStore>(std::make_shared<InMemoryStore>(),
                                       absl::StrCat("run", ++run));
}

// Connects `size` ranks concurrently through `store`.
std::vector<std::unique_ptr<Communicator>> ConnectGroup(int size, Store& store) {
  return testing::CreateRanksConcurrently(
      size, [&](int r) { return CreateTcpMeshCommunicator(r, size, store, LoopbackOptions()); });
}

INSTANTIATE_TEST_SUITE_P(Tcp, CommunicatorConformanceTest,
                         ::testing::ValuesIn(GroupsOfOneTwoAndFour({"tcp", ConnectGroup})));

// AllReduceSum of `size` ranks of `backend` on MakeRankInput(seed); rank 0's result.
std::vector<float> ReduceWith(const std::string& backend, int size, size_t count, uint32_t seed) {
  std::vector<std::unique_ptr<Communicator>> owned;
  std::unique_ptr<Store> store = FreshStore();
  if (backend == "local") {
    owned = *LocalGroup::Create(size);
  } else if (backend == "gloo") {
    GlooOptions gloo;
    gloo.connect_timeout = absl::Seconds(10);
    owned = testing::CreateRanksConcurrently(
        size, [&](int r) { return CreateGlooCommunicator(r, size, *store, gloo); });
  } else {
    owned = ConnectGroup(size, *store);
  }
  std::vector<std::vector<float>> data(static_cast<size_t>(size));
  RunOnAllRanks(size, [&](int r) {
    data[r] = testing::MakeRankInput(r, count, seed);
    if (owned[r] == nullptr) return;
    absl::Status s = owned[r]->AllReduceSum(data[r].data(), count, kTimeout);
    EXPECT_TRUE(s.ok()) << backend << " rank " << r << ": " << s;
  });
  return data[0];
}

TEST(TcpTest, AllReduceHasTheSameBitsAsTheLocalAndGlooBackends) {
  for (int size : {2, 3, 4}) {
    const std::vector<float> tcp = ReduceWith("tcp", size, 30011, 21);
    const std::vector<float> local = ReduceWith("local", size, 30011, 21);
    const std::vector<float> gloo = ReduceWith("gloo", size, 30011, 21);
    EXPECT_TRUE(testing::BitwiseEqual(tcp, local)) << size << " ranks: tcp vs local";
    EXPECT_TRUE(testing::BitwiseEqual(tcp, gloo)) << size << " ranks: tcp vs gloo";
    // The inputs are such that the sum order shows: a reversed order differs somewhere.
    std::vector<float> reversed = testing::MakeRankInput(size - 1, 30011, 21);
    for (int r = size - 2; r >= 0; --r) {
      std::vector<float> x = testing::MakeRankInput(r, 30011, 21);
      for (size_t e = 0; e < x.size(); ++e) reversed[e] += x[e];
    }
    if (size > 2) {
      EXPECT_FALSE(testing::BitwiseEqual(tcp, reversed)) << size << " ranks";
    }
  }
}

TEST(TcpTest, ConnectsThroughTheFileStore) {
  testing::ExpectConnectsThroughAFileStore(ConnectGroup);
}

TEST(TcpTest, MissingRankAtConnectGivesDeadlineExceeded) {
  for (int rank : {0, 1}) {  // rank 0 waits for a connection, rank 1 for an address
    std::unique_ptr<Store> store = FreshStore();
    TcpMeshOptions options = LoopbackOptions();
    options.connect_timeout = absl::Milliseconds(300);
    absl::Time start = absl::Now();
    auto comm = CreateTcpMeshCommunicator(rank, 2, *store, options);
    EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status())) << comm.status();
    EXPECT_TRUE(absl::StrContains(comm.status().message(), rank == 0 ? "rank(s) 1" : "addr/0"))
        << comm.status();
    EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  }
}

TEST(TcpTest, PeerThatStopsCallingMakesOthersTimeOut) {
  std::unique_ptr<Store> store = FreshStore();
  auto owned = ConnectGroup(3, *store);
  for (const auto& r : owned) ASSERT_NE(r, nullptr);
  const absl::Duration timeout = absl::Milliseconds(400);
  const auto outcomes = testing::AllReduceWithoutTheLastRank(owned, timeout);
  int timed_out = 0;
  for (int r = 0; r < 2; ++r) {
    const absl::Status& status = outcomes[r].status;
    // A rank that times out closes its connections; a peer still sending to it may see
    // that first.
    EXPECT_TRUE(absl::IsDeadlineExceeded(status) || absl::IsUnavailable(status))
        << "rank " << r << ": " << status;
    if (absl::IsDeadlineExceeded(status)) {
      ++timed_out;
      EXPECT_TRUE(absl::StrContains(status.message(), "rank 2")) << status;
    }
    EXPECT_LT(outcomes[r].took, timeout + absl::Seconds(2)) << "rank " << r;
    // Broken from now on: fails at once, with the first error.
    absl::Time start = absl::Now();
    absl::Status later = owned[r]->Barrier(absl::Seconds(30));
    EXPECT_EQ(later.code(), status.code()) << later;
    EXPECT_TRUE(absl::StrContains(later.message(), "failed earlier")) << later;
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
  }
  EXPECT_GE(timed_out, 1);
}

TEST(TcpTest, ZeroTimeoutChecksOnce) {
  std::unique_ptr<Store> store = FreshStore();
  auto owned = ConnectGroup(2, *store);
  for (const auto& r : owned) ASSERT_NE(r, nullptr);
  absl::Status status = owned[0]->Barrier(absl::ZeroDuration());
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
}

TEST(TcpTest, ClosedPeerFailsTheWaitingRanksAtOnce) {
  std::unique_ptr<Store> store = FreshStore();
  auto owned = ConnectGroup(3, *store);
  for (const auto& r : owned) ASSERT_NE(r, nullptr);
  std::vector<absl::Status> statuses(3);
  std::vector<absl::Duration> took(3);
  RunOnAllRanks(3, [&](int r) {
    if (r == 2) {  // goes away mid-call instead of calling
      absl::SleepFor(absl::Milliseconds(200));
      owned[2].reset();
      return;
    }
    std::vector<float> x(100000, 1.0f);
    absl::Time start = absl::Now();
    statuses[r] = owned[r]->AllReduceSum(x.data(), x.size(), absl::Seconds(30));
    took[r] = absl::Now() - start;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(absl::IsUnavailable(statuses[r])) << "rank " << r << ": " << statuses[r];
    EXPECT_LT(took[r], absl::Seconds(5)) << "rank " << r;
    EXPECT_TRUE(absl::IsUnavailable(owned[r]->Barrier(absl::Seconds(30))));
  }
}

TEST(TcpTest, RanksOutOfStepFailInsteadOfMixingUpData) {
  std::unique_ptr<Store> store = FreshStore();
  auto owned = ConnectGroup(2, *store);
  for (const auto& r : owned) ASSERT_NE(r, nullptr);
  std::vector<absl::Status> statuses(2);
  RunOnAllRanks(2, [&](int r) {
    // Same kind, different sizes: each rank's header disagrees with the other's call.
    std::vector<float> x(r == 0 ? 10 : 12, 1.0f);
    statuses[r] = owned[r]->AllReduceSum(x.data(), x.size(), absl::Seconds(30));
  });
  int out_of_step = 0;
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
    if (absl::IsFailedPrecondition(statuses[r])) {
      ++out_of_step;
      EXPECT_TRUE(absl::StrContains(statuses[r].message(), "different sequences")) << statuses[r];
    }
  }
  EXPECT_GE(out_of_step, 1);

  // Different kinds: rank 1 reads a Broadcast header while in AllGather.
  std::unique_ptr<Store> store2 = FreshStore();
  auto pair = ConnectGroup(2, *store2);
  for (const auto& r : pair) ASSERT_NE(r, nullptr);
  char data[64] = {0};
  ASSERT_TRUE(pair[0]->Broadcast(data, sizeof(data), 0, absl::Seconds(30)).ok());
  char gathered[128];
  absl::Status gather = pair[1]->AllGather(data, gathered, sizeof(data), absl::Seconds(30));
  EXPECT_TRUE(absl::IsFailedPrecondition(gather)) << gather;
  EXPECT_TRUE(absl::StrContains(gather.message(), "sent Broadcast")) << gather;
  // Rank 0's next call fails at once: it reads rank 1's AllGather header (sent before
  // rank 1 noticed), or the end of the connection rank 1 closed.
  absl::Time start = absl::Now();
  absl::Status barrier = pair[0]->Barrier(absl::Seconds(30));
  EXPECT_TRUE(absl::IsFailedPrecondition(barrier) || absl::IsUnavailable(barrier)) << barrier;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(TcpTest, HelloOfAnotherRunIsRefused) {
  std::unique_ptr<Store> store = FreshStore();
  std::vector<absl::Status> statuses(2);
  RunOnAllRanks(2, [&](int r) {
    TcpMeshOptions options = LoopbackOptions(r == 0 ? "run-a" : "run-b");
    options.connect_timeout = absl::Seconds(1);
    statuses[r] = CreateTcpMeshCommunicator(r, 2, *store, options).status();
  });
  EXPECT_TRUE(absl::IsUnavailable(statuses[1])) << statuses[1];
  EXPECT_TRUE(absl::StrContains(statuses[1].message(), "run ids differ")) << statuses[1];
  EXPECT_TRUE(absl::IsDeadlineExceeded(statuses[0])) << statuses[0];
  EXPECT_TRUE(absl::StrContains(statuses[0].message(), "refused")) << statuses[0];
}

TEST(TcpTest, StaleAddressIsRefused) {
  // Rank 0 of group A listens; group B's store holds A's address with another nonce,
  // as if an earlier listener had published it and A had since taken the port.
  std::unique_ptr<Store> store_a = FreshStore();
  std::unique_ptr<Store> store_b = FreshStore();
  absl::Status a_status;
  RunOnAllRanks(2, [&](int r) {
    if (r == 0) {
      TcpMeshOptions options = LoopbackOptions();
      options.connect_timeout = absl::Seconds(2);
      a_status = CreateTcpMeshCommunicator(0, 2, *store_a, options).status();
      return;
    }
    auto published = store_a->GetOne("addr/0", absl::Seconds(5));
    ASSERT_TRUE(published.ok()) << published.status();
    std::vector<std::string> parts = absl::StrSplit(*published, ' ');
    ASSERT_EQ(parts.size(), 3u);
    ASSERT_TRUE(store_b->Set("addr/0", absl::StrCat(parts[0], " ", parts[1], " 1234")).ok());
    TcpMeshOptions options = LoopbackOptions();
    options.connect_timeout = absl::Seconds(2);
    absl::Status b = CreateTcpMeshCommunicator(1, 2, *store_b, options).status();
    EXPECT_TRUE(absl::IsUnavailable(b)) << b;
    EXPECT_TRUE(absl::StrContains(b.message(), "stale address")) << b;
  });
  EXPECT_TRUE(absl::IsDeadlineExceeded(a_status)) << a_status;
}

TEST(TcpTest, BadCreateArgumentsAreRejected) {
  std::unique_ptr<Store> store = FreshStore();
  EXPECT_TRUE(
      absl::IsInvalidArgument(CreateTcpMeshCommunicator(2, 2, *store, LoopbackOptions()).status()));
  TcpMeshOptions bad_iface = LoopbackOptions();
  bad_iface.interface = "no-such-interface0";
  EXPECT_TRUE(absl::IsInvalidArgument(CreateTcpMeshCommunicator(0, 1, *store, bad_iface).status()));
  TcpMeshOptions long_run = LoopbackOptions(std::string(200, 'x'));
  EXPECT_TRUE(absl::IsInvalidArgument(CreateTcpMeshCommunicator(0, 1, *store, long_run).status()));
}

}  // namespace
}  // namespace tandem
