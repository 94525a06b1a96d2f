#include "worker/group_membership.h"

#include <gtest/gtest.h>

#include <thread>

#include "comm/store.h"

namespace tandem {
namespace worker {
namespace {

CommOptions Options(std::shared_ptr<Store> store, int rank, int size) {
  CommOptions options;
  options.backend = "gloo";
  options.rank = rank;
  options.size = size;
  options.store = std::move(store);
  options.run_id = "run1";
  options.connect_timeout = absl::Seconds(10);
  return options;
}

TEST(GroupMembershipTest, GenerationsCountUpAcrossLeaderRestarts) {
  auto store = std::make_shared<InMemoryStore>();
  auto leader = GroupMembership::Open(Options(store, 0, 2));
  ASSERT_TRUE(leader.ok()) << leader.status();
  auto current = (*leader)->CurrentGeneration();
  ASSERT_TRUE(current.ok());
  EXPECT_FALSE(current->has_value());
  EXPECT_EQ(*(*leader)->BeginNextGeneration(), 1u);
  EXPECT_EQ(*(*leader)->BeginNextGeneration(), 2u);
  // A restarted leader (a new object over the same store) continues from there.
  auto restarted = GroupMembership::Open(Options(store, 0, 2));
  ASSERT_TRUE(restarted.ok());
  EXPECT_EQ(*(*restarted)->BeginNextGeneration(), 3u);
  // Another run id starts afresh.
  CommOptions other = Options(store, 0, 2);
  other.run_id = "run2";
  auto fresh = GroupMembership::Open(other);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(*(*fresh)->BeginNextGeneration(), 1u);
}

TEST(GroupMembershipTest, FormedShutdownAndWaiting) {
  auto store = std::make_shared<InMemoryStore>();
  auto leader = GroupMembership::Open(Options(store, 0, 2));
  auto follower = GroupMembership::Open(Options(store, 1, 2));
  ASSERT_TRUE(leader.ok() && follower.ok());
  EXPECT_FALSE((*follower)->IsFormed(1));
  EXPECT_FALSE((*follower)->ShutdownGeneration().has_value());
  // Nothing yet: the follower gives up when asked to.
  int polls = 0;
  auto none = (*follower)->WaitForGenerationAfter(
      std::nullopt, [&] { return ++polls >= 3; }, absl::Milliseconds(1));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kCancelled);
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    (void)(*leader)->BeginNextGeneration();
  });
  auto first = (*follower)->WaitForGenerationAfter(
      std::nullopt, [] { return false; }, absl::Milliseconds(5));
  writer.join();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, 1u);
  ASSERT_TRUE((*leader)->MarkFormed(1).ok());
  EXPECT_TRUE((*follower)->IsFormed(1));
  ASSERT_TRUE((*leader)->MarkShutdown(1).ok());
  EXPECT_EQ((*follower)->ShutdownGeneration(), std::optional<uint64_t>(1));
  // Waiting for a generation after 1 sees the next one only.
  (void)(*leader)->BeginNextGeneration();
  auto next = (*follower)->WaitForGenerationAfter(1, [] { return false; });
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 2u);
}

TEST(GroupMembershipTest, ConnectFormsAGroupAndNamesMissingRanks) {
  auto store = std::make_shared<InMemoryStore>();
  std::vector<std::unique_ptr<GroupMembership>> ranks;
  for (int r = 0; r < 3; ++r) {
    CommOptions options = Options(store, r, 3);
    options.connect_timeout = absl::Seconds(1);
    auto opened = GroupMembership::Open(options);
    ASSERT_TRUE(opened.ok());
    ranks.push_back(*std::move(opened));
  }
  // Generation 1: rank 2 never comes.
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(2);
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { results[r] = ranks[r]->Connect(1).status(); });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(results[0].ok());
  EXPECT_EQ(ranks[0]->MissingRanks(1), std::vector<int>({2}));
  // Generation 2: everyone.
  threads.clear();
  std::vector<std::unique_ptr<Communicator>> comms(3);
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      auto comm = ranks[r]->Connect(2);
      if (comm.ok()) comms[r] = *std::move(comm);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) ASSERT_NE(comms[r], nullptr) << "rank " << r;
  EXPECT_TRUE(ranks[0]->MissingRanks(2).empty());
  threads.clear();
  std::vector<float> sums(3);
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      float x = static_cast<float>(r + 1);
      if (comms[r]->AllReduceSum(&x, 1, absl::Seconds(5)).ok()) sums[r] = x;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(sums, std::vector<float>({6, 6, 6}));
}

}  // namespace
}  // namespace worker
}  // namespace tandem
