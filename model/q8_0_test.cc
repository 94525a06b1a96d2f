#include "model/q8_0.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/float16.h"
#include "model/test_data.h"

namespace tandem {
namespace {

// Round trip: every value comes back within half a quantization step of its block, the
// largest magnitude of each block maps to +-127, and a partial last block works.
TEST(Q8_0Test, RoundTripWithinHalfAStep) {
  for (int64_t n : {1, 31, 32, 33, 100, 688}) {
    const std::vector<float> row = testing::NormalRow(n, static_cast<uint32_t>(n), 0.02f);
    std::vector<int8_t> quants(n);
    std::vector<uint16_t> scales(Q8BlocksPerRow(n));
    QuantizeQ8Row(row.data(), n, quants.data(), scales.data());
    std::vector<float> back(n);
    DequantizeQ8Row(quants.data(), scales.data(), n, back.data());
    for (int64_t b = 0; b < Q8BlocksPerRow(n); ++b) {
      const float scale = HalfToFloat(scales[b]);
      float max_abs = 0;
      int max_quant = 0;
      for (int64_t k = b * 32; k < std::min<int64_t>(n, (b + 1) * 32); ++k) {
        max_abs = std::max(max_abs, std::fabs(row[k]));
        max_quant = std::max(max_quant, std::abs(int(quants[k])));
        EXPECT_LE(std::fabs(back[k] - row[k]), 0.5f * scale * 1.001f) << "n=" << n << " k=" << k;
        EXPECT_EQ(back[k], float(quants[k]) * scale);
      }
      EXPECT_NEAR(scale, max_abs / 127.0f, max_abs / 127.0f * 1e-3f);
      EXPECT_EQ(max_quant, 127) << "n=" << n << " block " << b;
    }
  }
}

TEST(Q8_0Test, ZeroBlockAndSaturation) {
  std::vector<float> row(64, 0.0f);
  row[40] = -3.0f;
  row[41] = 3.0f;
  std::vector<int8_t> quants(64);
  std::vector<uint16_t> scales(2);
  QuantizeQ8Row(row.data(), 64, quants.data(), scales.data());
  EXPECT_EQ(HalfToFloat(scales[0]), 0.0f);
  for (int k = 0; k < 32; ++k) EXPECT_EQ(quants[k], 0);
  EXPECT_EQ(quants[40], -127);
  EXPECT_EQ(quants[41], 127);
  // Re-quantizing the dequantized row reproduces it exactly (idempotent).
  std::vector<float> back(64);
  DequantizeQ8Row(quants.data(), scales.data(), 64, back.data());
  std::vector<int8_t> quants2(64);
  std::vector<uint16_t> scales2(2);
  QuantizeQ8Row(back.data(), 64, quants2.data(), scales2.data());
  EXPECT_EQ(quants, quants2);
  EXPECT_EQ(scales, scales2);
}

}  // namespace
}  // namespace tandem
