#include "bench/memory_bandwidth.h"

#include "gtest/gtest.h"

namespace tandem {
namespace bench {
namespace {

// Small arrays (cache-resident) keep the test fast; the figures must be positive and
// finite whatever the thread count.
TEST(MemoryBandwidthTest, ReportsPositiveFigures) {
  for (int threads : {1, 2, 3}) {
    const MemoryBandwidth bw = MeasureMemoryBandwidth(threads, 1 << 20, 0.01);
    EXPECT_EQ(bw.threads, threads);
    EXPECT_GT(bw.triad_gbps, 0.1);
    EXPECT_GT(bw.read_gbps, 0.1);
    EXPECT_LT(bw.triad_gbps, 1e5);
  }
}

}  // namespace
}  // namespace bench
}  // namespace tandem
