// InMemoryStore and PrefixStore: set/get, waiting, timeouts, limits, shutdown.
#include "comm/store.h"

#include <gtest/gtest.h>

#include <thread>

namespace tandem {
namespace {

TEST(InMemoryStoreTest, SetThenGetInKeyOrder) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set("a", "1").ok());
  ASSERT_TRUE(store.Set("b", std::string("\0x", 2)).ok());
  auto values = store.Get({"b", "a"}, absl::ZeroDuration());
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{std::string("\0x", 2), "1"}));
  ASSERT_TRUE(store.Set("a", "2").ok());
  EXPECT_EQ(*store.GetOne("a", absl::ZeroDuration()), "2");
  EXPECT_EQ(store.num_keys(), 2u);
}

TEST(InMemoryStoreTest, GetWaitsForALaterSet) {
  InMemoryStore store;
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_TRUE(store.Set("late", "here").ok());
  });
  absl::Time start = absl::Now();
  auto value = store.GetOne("late", absl::Seconds(10));
  writer.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "here");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(40));
}

TEST(InMemoryStoreTest, MissingKeyTimesOutNamingIt) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set("present", "x").ok());
  absl::Time start = absl::Now();
  auto values = store.Get({"present", "absent"}, absl::Milliseconds(100));
  absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsDeadlineExceeded(values.status())) << values.status();
  EXPECT_NE(values.status().message().find("'absent'"), std::string::npos) << values.status();
  EXPECT_GE(took, absl::Milliseconds(90));
  EXPECT_LT(took, absl::Seconds(2));
}

TEST(InMemoryStoreTest, LimitsAreEnforced) {
  InMemoryStore store(/*max_total_bytes=*/4096);
  EXPECT_TRUE(absl::IsInvalidArgument(store.Set("", "x")));
  EXPECT_TRUE(absl::IsInvalidArgument(store.Set(std::string(kMaxStoreKeyBytes + 1, 'k'), "x")));
  EXPECT_TRUE(store.Set(std::string(kMaxStoreKeyBytes, 'k'), "x").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(store.Set("v", std::string(kMaxStoreValueBytes + 1, 'v'))));
  EXPECT_TRUE(absl::IsResourceExhausted(store.Set("big", std::string(4000, 'v'))));
  EXPECT_TRUE(absl::IsInvalidArgument(store.Get({}, absl::ZeroDuration()).status()));
  std::vector<std::string> too_many(kMaxStoreKeysPerGet + 1, "k");
  EXPECT_TRUE(absl::IsInvalidArgument(store.Get(too_many, absl::ZeroDuration()).status()));
}

TEST(InMemoryStoreTest, ShutdownWakesWaiters) {
  InMemoryStore store;
  absl::Status status;
  std::thread waiter([&] { status = store.GetOne("never", absl::Seconds(30)).status(); });
  absl::SleepFor(absl::Milliseconds(50));
  absl::Time start = absl::Now();
  store.Shutdown();
  waiter.join();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_TRUE(absl::IsUnavailable(store.Set("a", "b")));
}

TEST(InMemoryStoreTest, CancelledWaitStopsEarly) {
  InMemoryStore store;
  int polls = 0;
  auto values = store.GetUnlessCancelled({"never"}, absl::Seconds(30), absl::Milliseconds(10),
                                         [&] { return ++polls >= 3; });
  EXPECT_TRUE(absl::IsCancelled(values.status())) << values.status();
  EXPECT_EQ(polls, 3);
}

TEST(PrefixStoreTest, NamespacesKeys) {
  auto base = std::make_shared<InMemoryStore>();
  PrefixStore run1(base, "run1");
  PrefixStore run2(base, "run2");
  ASSERT_TRUE(run1.Set("addr", "one").ok());
  ASSERT_TRUE(run2.Set("addr", "two").ok());
  EXPECT_EQ(*run1.GetOne("addr", absl::ZeroDuration()), "one");
  EXPECT_EQ(*run2.GetOne("addr", absl::ZeroDuration()), "two");
  EXPECT_EQ(*base->GetOne("run1/addr", absl::ZeroDuration()), "one");
  EXPECT_TRUE(absl::IsDeadlineExceeded(run1.GetOne("other", absl::ZeroDuration()).status()));
}

}  // namespace
}  // namespace tandem
