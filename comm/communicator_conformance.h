// The conformance suite every Communicator backend passes: the contract of
// comm/communicator.h (rank order sums, batch invariance, AllGather, Broadcast, Barrier,
// zero-sized and large calls, argument errors) checked on groups of 1, 2 and 4 ranks,
// one thread per rank.
//
// A backend's test file supplies a GroupFactory and instantiates the suite once:
//
//   INSTANTIATE_TEST_SUITE_P(Gloo, CommunicatorConformanceTest,
//                            ::testing::ValuesIn(GroupsOfOneTwoAndFour({"gloo", Connect})));
//
// and keeps only what is specific to that backend (set-up errors, timeouts, peers that
// go away). Contract of GroupFactory::connect(size, store): returns `size`
// Communicators, element r being rank r of one connected group; each reports
// `backend`. It may rendezvous through `store` (fresh and empty, borrowed only during
// the call). A rank it could not create is reported as a test failure and left null.
#ifndef TANDEM_COMM_COMMUNICATOR_CONFORMANCE_H_
#define TANDEM_COMM_COMMUNICATOR_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "comm/store.h"

namespace tandem::testing {

using ConnectGroupFn =
    std::function<std::vector<std::unique_ptr<Communicator>>(int size, Store& store)>;

struct GroupFactory {
  std::string backend;  // what every rank's backend() reports
  ConnectGroupFn connect;
};

// The suite's parameter: one backend at one group size.
struct ConformanceGroup {
  GroupFactory factory;
  int size = 1;
};

// Shown in test listings and failures, e.g. "4 gloo ranks".
void PrintTo(const ConformanceGroup& group, std::ostream* os);

// `factory` at 1, 2 and 4 ranks.
std::vector<ConformanceGroup> GroupsOfOneTwoAndFour(const GroupFactory& factory);

class CommunicatorConformanceTest : public ::testing::TestWithParam<ConformanceGroup> {
 protected:
  void SetUp() override;
  int size() const { return GetParam().size; }

  std::vector<std::unique_ptr<Communicator>> owned_;
  std::vector<Communicator*> ranks_;  // owned_, element r being rank r
};

// For writing a ConnectGroupFn: create(rank) for every rank at once, each on its own
// thread (ranks that rendezvous wait for each other). A rank whose create fails is
// reported as a test failure and left null.
std::vector<std::unique_ptr<Communicator>> CreateRanksConcurrently(
    int size, const std::function<absl::StatusOr<std::unique_ptr<Communicator>>(int rank)>& create);

// For backends that rendezvous through a Store: a group of 3 connected through a fresh
// FileStore (under TEST_TMPDIR) reduces correctly.
void ExpectConnectsThroughAFileStore(const ConnectGroupFn& connect);

}  // namespace tandem::testing

#endif  // TANDEM_COMM_COMMUNICATOR_CONFORMANCE_H_
