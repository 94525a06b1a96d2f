// The `gloo` backend with 1, 2 and 4 ranks in one process (one thread and one
// Communicator per rank, real TCP over loopback): the conformance suite, rendezvous
// through the file store, missing and stalled peers, and set-up errors.
#include "comm/gloo_communicator.h"

#include <gtest/gtest.h>

#include "comm/collective_checks.h"
#include "comm/communicator_conformance.h"

namespace tandem {
namespace {

using testing::CommunicatorConformanceTest;
using testing::GroupsOfOneTwoAndFour;

GlooOptions LoopbackOptions() {
  GlooOptions options;
  options.hostname = "127.0.0.1";
  options.connect_timeout = absl::Seconds(10);
  return options;
}

// Connects `size` ranks concurrently through `store`.
std::vector<std::unique_ptr<Communicator>> ConnectGroup(int size, Store& store) {
  return testing::CreateRanksConcurrently(
      size, [&](int r) { return CreateGlooCommunicator(r, size, store, LoopbackOptions()); });
}

INSTANTIATE_TEST_SUITE_P(Gloo, CommunicatorConformanceTest,
                         ::testing::ValuesIn(GroupsOfOneTwoAndFour({"gloo", ConnectGroup})));

TEST(GlooTest, ConnectsThroughTheFileStore) {
  testing::ExpectConnectsThroughAFileStore(ConnectGroup);
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
  const auto outcomes = testing::AllReduceWithoutTheLastRank(owned, timeout);
  for (int r = 0; r < 2; ++r) {
    const absl::Status& status = outcomes[r].status;
    EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << "rank " << r << ": " << status;
    EXPECT_LT(outcomes[r].took, timeout + absl::Seconds(2)) << "rank " << r;
    // Broken from now on: fails at once.
    absl::Time start = absl::Now();
    EXPECT_FALSE(owned[r]->Barrier(absl::Seconds(30)).ok());
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
  }
}

TEST(GlooTest, BadCreateArgumentsAreRejected) {
  PrefixStore store(std::make_shared<InMemoryStore>(), "args");
  EXPECT_TRUE(
      absl::IsInvalidArgument(CreateGlooCommunicator(2, 2, store, LoopbackOptions()).status()));
  GlooOptions bad_iface = LoopbackOptions();
  bad_iface.interface = "no-such-interface0";
  EXPECT_TRUE(absl::IsInvalidArgument(CreateGlooCommunicator(0, 1, store, bad_iface).status()));
}

}  // namespace
}  // namespace tandem
