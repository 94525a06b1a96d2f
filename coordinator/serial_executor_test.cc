#include "coordinator/serial_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace tandem::coordinator {
namespace {

TEST(SerialExecutorTest, RunsInOrderOneAtATime) {
  SerialExecutor exec("test");
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
  std::vector<int> order;
  std::vector<std::future<int>> futures;
  for (int i = 0; i < 50; ++i) {
    futures.push_back(exec.Submit([&, i] {
      int now = ++running;
      max_running = std::max(max_running.load(), now);
      order.push_back(i);  // Safe: tasks never overlap.
      --running;
      return i * i;
    }));
  }
  for (int i = 0; i < 50; ++i) EXPECT_EQ(futures[i].get(), i * i);
  EXPECT_EQ(max_running.load(), 1);
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST(SerialExecutorTest, TwoExecutorsOverlap) {
  SerialExecutor a("a"), b("b");
  std::promise<void> a_started;
  std::future<void> a_started_f = a_started.get_future();
  std::promise<void> release;
  std::shared_future<void> release_f = release.get_future().share();
  auto fa = a.Submit([&] {
    a_started.set_value();
    release_f.wait();
    return 1;
  });
  a_started_f.wait();
  // b runs while a is blocked: they are independent.
  auto fb = b.Submit([] { return 2; });
  EXPECT_EQ(fb.get(), 2);
  release.set_value();
  EXPECT_EQ(fa.get(), 1);
}

TEST(SerialExecutorTest, BusyTimeCountsTaskTime) {
  SerialExecutor exec("busy");
  exec.Submit([] { absl::SleepFor(absl::Milliseconds(30)); }).get();
  EXPECT_GE(exec.busy_time(), absl::Milliseconds(25));
  EXPECT_LT(exec.busy_time(), absl::Seconds(5));
}

// RunHere runs on the caller's thread after the tasks queued before it; a task
// submitted while it runs (from another thread) waits for it; its time is busy time.
TEST(SerialExecutorTest, RunHereKeepsSubmissionOrder) {
  SerialExecutor exec("inline");
  absl::Mutex mu;
  std::vector<int> order;
  const auto record = [&](int i) {
    absl::MutexLock lock(&mu);
    order.push_back(i);
  };
  auto first = exec.Submit([&] {
    absl::SleepFor(absl::Milliseconds(30));
    record(1);
  });
  std::future<void> third;
  const std::thread::id caller = std::this_thread::get_id();
  const std::thread::id ran_on = exec.RunHere([&] {
    record(2);
    std::thread other([&] { third = exec.Submit([&] { record(3); }); });
    other.join();
    absl::SleepFor(absl::Milliseconds(30));
    record(4);
    return std::this_thread::get_id();
  });
  third.get();
  EXPECT_EQ(ran_on, caller);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 4, 3}));
  EXPECT_GE(exec.busy_time(), absl::Milliseconds(50));
}

TEST(SerialExecutorTest, DestructorDrainsQueuedTasks) {
  std::atomic<int> done{0};
  {
    SerialExecutor exec("drain");
    for (int i = 0; i < 10; ++i) exec.Submit([&] { ++done; });
  }
  EXPECT_EQ(done.load(), 10);
}

}  // namespace
}  // namespace tandem::coordinator
