#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace cpu {
namespace {

// Runs ParallelFor and returns the ranges it produced, sorted.
std::vector<std::pair<int64_t, int64_t>> Ranges(ThreadPool& pool, int64_t n, int64_t min_chunk) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.ParallelFor(
      n,
      [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> lock(mu);
        ranges.emplace_back(b, e);
      },
      min_chunk);
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

TEST(ThreadPoolTest, CoversRangeWithContiguousEvenSplit) {
  ThreadPool pool(4);
  for (int64_t n : {1, 2, 3, 4, 5, 7, 100, 1001}) {
    const auto ranges = Ranges(pool, n, 1);
    const int expected_ranges = static_cast<int>(std::min<int64_t>(4, n));
    ASSERT_EQ(ranges.size(), size_t(expected_ranges)) << "n=" << n;
    for (int t = 0; t < expected_ranges; ++t) {
      EXPECT_EQ(ranges[t].first, n * t / expected_ranges) << "n=" << n;
      EXPECT_EQ(ranges[t].second, n * (t + 1) / expected_ranges) << "n=" << n;
    }
  }
}

TEST(ThreadPoolTest, MinChunkLimitsRanges) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.NumRanges(100, 30), 4);
  EXPECT_EQ(pool.NumRanges(100, 40), 3);
  EXPECT_EQ(pool.NumRanges(100, 100), 1);
  EXPECT_EQ(pool.NumRanges(0, 1), 0);
  EXPECT_EQ(Ranges(pool, 100, 40).size(), 3u);
  EXPECT_TRUE(Ranges(pool, 0, 1).empty());
}

TEST(ThreadPoolTest, UsesDistinctThreads) {
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> ids;
  pool.ParallelFor(3, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u);
}

TEST(ThreadPoolTest, SingleThreadRunsInline) {
  ThreadPool pool(1);
  const auto caller = std::this_thread::get_id();
  int calls = 0;
  pool.ParallelFor(10, [&](int64_t b, int64_t e) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPoolTest, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.ParallelFor(2, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.ParallelFor(10, [&](int64_t ib, int64_t ie) { total += ie - ib; });
    }
  });
  EXPECT_EQ(total.load(), 20);
}

TEST(ThreadPoolTest, ManyBackToBackJobsAndSleepingWorkers) {
  ThreadPool pool(4);
  std::vector<int> hits(64, 0);
  for (int round = 0; round < 2000; ++round) {
    pool.ParallelFor(64, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++hits[i];
    });
    if (round % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int h : hits) EXPECT_EQ(h, 2000);
}

TEST(ThreadPoolTest, ConcurrentCallersAreSerialized) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        pool.ParallelFor(100, [&](int64_t b, int64_t e) { total += e - b; });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 200 * 100);
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
