// Measures this machine's achievable float32 multiply-add throughput, the yardstick
// kernel benchmarks report their efficiency against.
#ifndef TANDEM_BENCH_PEAK_FLOPS_H_
#define TANDEM_BENCH_PEAK_FLOPS_H_

namespace tandem {
namespace bench {

struct PeakFlops {
  const char* isa = "";         // "avx2+fma" or "portable" (scalar/SSE multiply + add).
  int simd_width = 1;           // float lanes per vector instruction.
  int threads = 1;              // Threads run concurrently for the all-core figure.
  double fma_ghz_per_core = 0;  // Vector FMA instructions per nanosecond, one thread
                                // ("GHz-equivalent": 2 FMA ports x clock on most cores).
  double gflops_per_core = 0;   // simd_width x 2 x fma_ghz_per_core.
  double gflops_all = 0;        // Measured with `threads` threads at once.
  // The same with 512-bit FMAs (16 lanes) where the CPU has the AVX-512 level, else 0:
  // the yardstick of a kernel that issues 512-bit FMAs (the float matmul's prefill tiles at
  // the AVX-512 level, kernels/cpu/paired_tiles.h; 256-bit ones elsewhere).
  double gflops_all_512 = 0;
};

// Runs a register-resident FMA loop (12 independent accumulators, enough to cover
// latency x ports on current x86 cores) for about `seconds` per measurement, best of
// three, on one thread and on `threads` threads (and with 512-bit vectors on `threads`
// threads where the CPU has them).
PeakFlops MeasurePeakFlops(int threads, double seconds);

}  // namespace bench
}  // namespace tandem

#endif  // TANDEM_BENCH_PEAK_FLOPS_H_
