#include "coordinator/admission_queue.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

using ::testing::HasSubstr;

TEST(AdmissionQueueTest, FifoOrderAndPopUpTo) {
  AdmissionQueue<std::string> queue(4);
  for (uint64_t id = 1; id <= 3; ++id) {
    ASSERT_TRUE(queue.TryPush(id, "req" + std::to_string(id)).ok());
  }
  EXPECT_EQ(queue.size(), 3u);
  auto first = queue.PopUpTo(2);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].id, 1u);
  EXPECT_EQ(first[0].payload, "req1");
  EXPECT_EQ(first[1].id, 2u);
  auto rest = queue.PopUpTo(10);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].payload, "req3");
  EXPECT_TRUE(queue.empty());
  EXPECT_TRUE(queue.PopUpTo(5).empty());
}

TEST(AdmissionQueueTest, FullQueueRejectsAtOnceWithLimitAndFlag) {
  AdmissionQueue<int> queue(2, "--max_queue");
  ASSERT_TRUE(queue.TryPush(1, 10).ok());
  ASSERT_TRUE(queue.TryPush(2, 20).ok());
  absl::Status status = queue.TryPush(3, 30);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(status.message()), HasSubstr("2 requests"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("--max_queue"));
  EXPECT_EQ(queue.size(), 2u);
  // Room again after a pop.
  queue.PopUpTo(1);
  EXPECT_TRUE(queue.TryPush(3, 30).ok());
}

TEST(AdmissionQueueTest, ZeroCapacityRejectsEverything) {
  AdmissionQueue<int> queue(0);
  EXPECT_EQ(queue.TryPush(1, 1).code(), absl::StatusCode::kResourceExhausted);
}

TEST(AdmissionQueueTest, FailedPushLeavesMoveOnlyPayloadIntact) {
  AdmissionQueue<std::unique_ptr<int>> queue(1);
  ASSERT_TRUE(queue.TryPush(1, std::make_unique<int>(1)).ok());
  auto payload = std::make_unique<int>(2);
  EXPECT_FALSE(queue.TryPush(2, std::move(payload)).ok());
  ASSERT_NE(payload, nullptr);
  EXPECT_EQ(*payload, 2);
}

TEST(AdmissionQueueTest, DuplicateIdRejected) {
  AdmissionQueue<int> queue(4);
  ASSERT_TRUE(queue.TryPush(7, 1).ok());
  EXPECT_EQ(queue.TryPush(7, 2).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(queue.size(), 1u);
}

TEST(AdmissionQueueTest, RemoveCancelledEntry) {
  AdmissionQueue<std::string> queue(4);
  ASSERT_TRUE(queue.TryPush(1, "a").ok());
  ASSERT_TRUE(queue.TryPush(2, "b").ok());
  ASSERT_TRUE(queue.TryPush(3, "c").ok());
  std::optional<std::string> removed = queue.Remove(2);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(*removed, "b");
  EXPECT_FALSE(queue.Remove(2).has_value());
  EXPECT_FALSE(queue.Remove(99).has_value());
  auto entries = queue.PopUpTo(5);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].id, 1u);
  EXPECT_EQ(entries[1].id, 3u);
  // A popped id can be reused and is no longer removable.
  EXPECT_FALSE(queue.Remove(1).has_value());
  EXPECT_TRUE(queue.TryPush(1, "again").ok());
}

TEST(AdmissionQueueTest, WaitUntilNonEmpty) {
  AdmissionQueue<int> queue(4);
  EXPECT_FALSE(queue.WaitUntilNonEmpty(absl::Milliseconds(5)));
  std::thread pusher([&] {
    absl::SleepFor(absl::Milliseconds(20));
    ASSERT_TRUE(queue.TryPush(1, 1).ok());
  });
  EXPECT_TRUE(queue.WaitUntilNonEmpty(absl::Seconds(30)));
  pusher.join();
}

TEST(AdmissionQueueTest, ConcurrentPushesRespectCapacityAndLoseNothing) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 500;
  constexpr size_t kCapacity = 1000;
  AdmissionQueue<int> queue(kCapacity);
  std::vector<int> accepted(kThreads, 0), rejected(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t id = static_cast<uint64_t>(t) * kPerThread + i;
        absl::Status status = queue.TryPush(id, static_cast<int>(id));
        if (status.ok()) {
          ++accepted[t];
        } else {
          EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
          ++rejected[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  int total_accepted = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(accepted[t] + rejected[t], kPerThread);
    total_accepted += accepted[t];
  }
  EXPECT_EQ(total_accepted, static_cast<int>(kCapacity));
  auto entries = queue.PopUpTo(kCapacity * 2);
  ASSERT_EQ(entries.size(), kCapacity);
  absl::flat_hash_set<uint64_t> ids;
  for (const auto& e : entries) {
    EXPECT_EQ(e.payload, static_cast<int>(e.id));
    EXPECT_TRUE(ids.insert(e.id).second);
  }
}

TEST(AdmissionQueueTest, ConcurrentPushPopAndRemove) {
  AdmissionQueue<int> queue(64);
  std::atomic<int> pushed{0}, taken{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> producers;
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const uint64_t id = static_cast<uint64_t>(t) * 100000 + i;
        while (!queue.TryPush(id, 0).ok()) std::this_thread::yield();
        ++pushed;
        if (i % 3 == 0 && queue.Remove(id).has_value()) ++taken;
      }
    });
  }
  std::thread consumer([&] {
    while (!done.load() || !queue.empty()) {
      taken += static_cast<int>(queue.PopUpTo(8).size());
      std::this_thread::yield();
    }
  });
  for (auto& th : producers) th.join();
  done = true;
  consumer.join();
  EXPECT_EQ(pushed.load(), 8000);
  EXPECT_EQ(taken.load(), 8000);  // Every entry left exactly once.
}

}  // namespace
}  // namespace tandem::coordinator
