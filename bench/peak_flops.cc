#include "bench/peak_flops.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/cpu/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tandem {
namespace bench {
namespace {

constexpr int kAccumulators = 12;

#if defined(__x86_64__)
// `iterations` x 12 vector FMAs; returns a value so the loop is not optimised away.
__attribute__((target("avx2,fma"), noinline)) float FmaLoopAvx2(int64_t iterations) {
  __m256 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm256_add_ps(sum, acc[i]);
  return _mm256_cvtss_f32(sum);
}

// The same with 512-bit vectors (16 lanes).
__attribute__((target("avx512f"), noinline)) float FmaLoopAvx512(int64_t iterations) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];  // (Not _mm512_reduce_add_ps: GCC 12 bug 105593 warns.)
  _mm512_store_ps(lanes, sum);
  return lanes[0] + lanes[15];
}
#endif

// Portable: a multiply and an add per lane-op (counted as one "FMA").
__attribute__((noinline)) float FmaLoopPortable(int64_t iterations) {
  float acc[kAccumulators * 4];
  for (int i = 0; i < kAccumulators * 4; ++i) acc[i] = 0.001f * i;
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAccumulators * 4; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
  }
  float sum = 0;
  for (float v : acc) sum += v;
  return sum;
}

std::atomic<float> g_sink{0};

enum class Loop { kPortable, kAvx2, kAvx512 };

// Vector FMAs per nanosecond of one thread: the best of ~1 ms samples over `seconds`.
double BestRate(Loop loop, double seconds) {
  using Clock = std::chrono::steady_clock;
  auto run = [loop](int64_t iterations) {
#if defined(__x86_64__)
    if (loop == Loop::kAvx2) return FmaLoopAvx2(iterations);
    if (loop == Loop::kAvx512) return FmaLoopAvx512(iterations);
#endif
    return FmaLoopPortable(iterations);
  };
  const double fmas_per_iteration = loop == Loop::kPortable ? kAccumulators * 4 : kAccumulators;
  int64_t iterations = 1 << 10;
  while (true) {
    const auto start = Clock::now();
    g_sink = g_sink + run(iterations);
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (elapsed > 0.25e-3) {
      iterations = static_cast<int64_t>(iterations * 1e-3 / elapsed) + 1;
      break;
    }
    iterations *= 2;
  }
  double best = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  for (int sample = 0; sample < 3 || Clock::now() < end; ++sample) {
    const auto start = Clock::now();
    g_sink = g_sink + run(iterations);
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    best = std::max(best, iterations * fmas_per_iteration / ns);
  }
  return best;
}

// Mean over `threads` threads running BestRate at the same time.
double MeasureRate(Loop loop, int threads, double seconds) {
  std::vector<double> rates(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] { rates[t] = BestRate(loop, seconds); });
  }
  for (auto& w : workers) w.join();
  double mean = 0;
  for (double r : rates) mean += r / threads;
  return mean;
}

}  // namespace

PeakFlops MeasurePeakFlops(int threads, double seconds) {
  PeakFlops peak;
  const bool avx2 = cpu::CpuHasAvx2Fma();
  peak.isa = avx2 ? "avx2+fma" : "portable";
  peak.simd_width = avx2 ? 8 : 1;
  peak.threads = std::max(1, threads);
  const Loop loop = avx2 ? Loop::kAvx2 : Loop::kPortable;
  peak.fma_ghz_per_core = MeasureRate(loop, 1, seconds);
  peak.gflops_per_core = peak.simd_width * 2 * peak.fma_ghz_per_core;
  peak.gflops_all = peak.threads == 1 ? peak.gflops_per_core
                                      : peak.threads * peak.simd_width * 2 *
                                            MeasureRate(loop, peak.threads, seconds);
  if (cpu::CpuHasAvx512Vnni()) {
    peak.gflops_all_512 = peak.threads * 16 * 2 * MeasureRate(Loop::kAvx512, peak.threads, seconds);
  }
  return peak;
}

}  // namespace bench
}  // namespace tandem
