// CreateCommunicator: backend selection, option validation, and gloo and tcp groups
// built through each kind of rendezvous source.
#include "comm/factory.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "comm/collective_checks.h"
#include "comm/file_store.h"
#include "comm/nccl_communicator.h"

namespace tandem {
namespace {

CommOptions Options(const std::string& backend, int rank, int size) {
  CommOptions options;
  options.backend = backend;
  options.rank = rank;
  options.size = size;
  options.connect_timeout = absl::Seconds(10);
  return options;
}

TEST(FactoryTest, LocalSingleRank) {
  auto comm = CreateCommunicator(Options("local", 0, 1));
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->backend(), "local");
  EXPECT_EQ((*comm)->size(), 1);
}

TEST(FactoryTest, GlooSingleRankNeedsNoRendezvous) {
  auto comm = CreateCommunicator(Options("gloo", 0, 1));
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->backend(), "gloo");
  float x = 3.0f;
  EXPECT_TRUE((*comm)->AllReduceSum(&x, 1, absl::Seconds(1)).ok());
  EXPECT_EQ(x, 3.0f);
}

TEST(FactoryTest, TcpSingleRankNeedsNoRendezvous) {
  auto comm = CreateCommunicator(Options("tcp", 0, 1));
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->backend(), "tcp");
  float x = 3.0f;
  EXPECT_TRUE((*comm)->AllReduceSum(&x, 1, absl::Seconds(1)).ok());
  EXPECT_EQ(x, 3.0f);
}

TEST(FactoryTest, RejectsInconsistentOptions) {
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(Options("mpi", 0, 1)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(Options("local", 0, 2)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(Options("gloo", 2, 2)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(Options("gloo", 0, 0)).status()));
  CommOptions no_store = Options("gloo", 0, 2);
  no_store.run_id = "r";
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(no_store).status()));
  CommOptions two_stores = no_store;
  two_stores.store = std::make_shared<InMemoryStore>();
  two_stores.store_directory = "/tmp";
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(two_stores).status()));
  CommOptions bad_run = Options("gloo", 0, 2);
  bad_run.store = std::make_shared<InMemoryStore>();
  bad_run.run_id = "has/slash";
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(bad_run).status()));
  bad_run.run_id = "";
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(bad_run).status()));
  CommOptions bad_address = Options("gloo", 0, 2);
  bad_address.run_id = "r";
  bad_address.rendezvous_address = "no-port";
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(bad_address).status()));
  CommOptions tcp_no_store = Options("tcp", 0, 2);
  tcp_no_store.run_id = "r";
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(tcp_no_store).status()));
  CommOptions tcp_bad_iface = Options("tcp", 0, 1);
  tcp_bad_iface.interface = "no-such-interface0";
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(tcp_bad_iface).status()));
  CommOptions zero_timeout = Options("local", 0, 1);
  zero_timeout.connect_timeout = absl::ZeroDuration();
  EXPECT_TRUE(absl::IsInvalidArgument(CreateCommunicator(zero_timeout).status()));
}

TEST(FactoryTest, NcclWithoutDeviceOrCudaFailsCleanly) {
  CommOptions options = Options("nccl", 0, 1);
  auto comm = CreateCommunicator(options);
  if (comm.ok()) {
    std::printf("nccl backend created on a real device\n");
    EXPECT_EQ((*comm)->backend(), "nccl");
  } else if (NcclCompiledIn()) {
    EXPECT_TRUE(absl::IsUnavailable(comm.status())) << comm.status();
  } else {
    EXPECT_TRUE(absl::IsUnimplemented(comm.status())) << comm.status();
  }
}

// Connects `size` ranks (threads) with the given base options, runs an all-reduce.
void ExpectGroupWorks(const CommOptions& base, int size) {
  std::vector<std::unique_ptr<Communicator>> ranks(static_cast<size_t>(size));
  testing::RunOnAllRanks(size, [&](int r) {
    CommOptions options = base;
    options.rank = r;
    options.size = size;
    auto comm = CreateCommunicator(options);
    ASSERT_TRUE(comm.ok()) << "rank " << r << ": " << comm.status();
    ranks[r] = *std::move(comm);
  });
  std::vector<Communicator*> raw;
  for (auto& r : ranks) {
    ASSERT_NE(r, nullptr);
    raw.push_back(r.get());
  }
  EXPECT_EQ(raw[0]->backend(), base.backend);
  testing::ExpectAllReduceIsRankOrderSum(raw, 4096, 9, absl::Seconds(10));
}

TEST(FactoryTest, GlooThroughAnExistingStore) {
  CommOptions options = Options("gloo", 0, 3);
  options.store = std::make_shared<InMemoryStore>();
  options.run_id = "mem-1";
  ExpectGroupWorks(options, 3);
  // Keys were prefixed with the run id.
  EXPECT_TRUE(options.store->GetOne("mem-1/0", absl::ZeroDuration()).ok());
}

TEST(FactoryTest, GlooThroughAStoreDirectory) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  auto fresh = FileStore::CreateFresh(tmp != nullptr ? tmp : "/tmp");
  ASSERT_TRUE(fresh.ok());
  CommOptions options = Options("gloo", 0, 2);
  options.store_directory = (*fresh)->directory();
  options.run_id = "dir-1";
  ExpectGroupWorks(options, 2);
}

TEST(FactoryTest, TcpThroughAnExistingStore) {
  CommOptions options = Options("tcp", 0, 3);
  options.store = std::make_shared<InMemoryStore>();
  options.run_id = "mem-2";
  ExpectGroupWorks(options, 3);
  // Keys were prefixed with the run id.
  EXPECT_TRUE(options.store->GetOne("mem-2/addr/0", absl::ZeroDuration()).ok());
}

TEST(FactoryTest, TcpThroughAStoreDirectory) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  auto fresh = FileStore::CreateFresh(tmp != nullptr ? tmp : "/tmp");
  ASSERT_TRUE(fresh.ok());
  CommOptions options = Options("tcp", 0, 2);
  options.store_directory = (*fresh)->directory();
  options.run_id = "dir-2";
  ExpectGroupWorks(options, 2);
}

}  // namespace
}  // namespace tandem
