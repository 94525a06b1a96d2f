#include "bench/memory_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tandem {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

// Best seconds of repeated runs of `body(begin, end)` split over `threads` threads.
double BestSeconds(int threads, size_t n, double seconds,
                   const std::function<void(size_t, size_t)>& body) {
  double best = 1e30, total = 0;
  for (int rep = 0; rep < 3 || total < seconds; ++rep) {
    const auto start = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) {
      pool.emplace_back(body, n * t / threads, n * (t + 1) / threads);
    }
    body(0, n / threads);
    for (std::thread& thread : pool) thread.join();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::min(best, elapsed);
    total += elapsed;
  }
  return best;
}

}  // namespace

MemoryBandwidth MeasureMemoryBandwidth(int threads, size_t bytes_per_array, double seconds) {
  threads = std::max(1, threads);
  const size_t n = std::max<size_t>(1024, bytes_per_array / sizeof(float));
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  MemoryBandwidth result;
  result.threads = threads;
  const double triad = BestSeconds(threads, n, seconds, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) a[i] = b[i] + 3.0f * c[i];
  });
  result.triad_gbps = 12.0 * n / triad * 1e-9;
  // XOR of 32-bit words: vectorises at -O3 without fast-math, so the read is not
  // limited by a float-add dependency chain.
  std::vector<uint32_t> words(n, 0x12345678u);
  std::atomic<uint32_t> folds{0};
  const double read = BestSeconds(threads, n, seconds, [&](size_t begin, size_t end) {
    uint32_t fold = 0;
    for (size_t i = begin; i < end; ++i) fold ^= words[i];
    folds.fetch_xor(fold);
  });
  result.read_gbps = 4.0 * n / read * 1e-9;
  if (folds.load() == 1u) result.read_gbps += 0;  // Keeps the folds observable.
  return result;
}

}  // namespace bench
}  // namespace tandem
