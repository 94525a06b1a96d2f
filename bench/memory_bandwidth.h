// Measures this machine's main-memory bandwidth, the yardstick for memory-bound
// kernels (batch-1 decode streams every weight once per token).
#ifndef TANDEM_BENCH_MEMORY_BANDWIDTH_H_
#define TANDEM_BENCH_MEMORY_BANDWIDTH_H_

#include <cstddef>

namespace tandem {
namespace bench {

struct MemoryBandwidth {
  int threads = 1;
  double triad_gbps = 0;  // STREAM triad a[i] = b[i] + s * c[i]: 12 bytes per float
                          // element (two reads, one write), write-allocate not counted.
  double read_gbps = 0;   // A sum over one array: 4 bytes read per float element.
};

// Runs each kernel over float arrays of `bytes_per_array` bytes (far larger than the
// caches for a main-memory figure) split across `threads` threads, repeated for about
// `seconds`; reports the best repetition of each.
MemoryBandwidth MeasureMemoryBandwidth(int threads, size_t bytes_per_array, double seconds);

}  // namespace bench
}  // namespace tandem

#endif  // TANDEM_BENCH_MEMORY_BANDWIDTH_H_
