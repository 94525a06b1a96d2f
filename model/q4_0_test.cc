#include "model/q4_0.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/float16.h"
#include "model/test_data.h"

namespace tandem {
namespace {

// Round trip: every value comes back within half a step of its block, the largest
// magnitude of each block maps to +-7, and partial last blocks (odd too) work.
TEST(Q4_0Test, RoundTripWithinHalfAStep) {
  for (int64_t n : {1, 7, 31, 32, 33, 100, 688}) {
    const std::vector<float> row = testing::NormalRow(n, static_cast<uint32_t>(n), 0.02f);
    std::vector<uint8_t> packed(Q4BytesPerRow(n));
    std::vector<uint16_t> scales(Q8BlocksPerRow(n));
    QuantizeQ4Row(row.data(), n, packed.data(), scales.data());
    std::vector<float> back(n);
    DequantizeQ4Row(packed.data(), scales.data(), n, back.data());
    for (int64_t b = 0; b < Q8BlocksPerRow(n); ++b) {
      const float scale = HalfToFloat(scales[b]);
      float max_abs = 0;
      int max_quant = 0;
      for (int64_t k = b * 32; k < std::min<int64_t>(n, (b + 1) * 32); ++k) {
        const int q = Q4QuantAt(packed.data(), n, k);
        max_abs = std::max(max_abs, std::fabs(row[k]));
        max_quant = std::max(max_quant, std::abs(q));
        EXPECT_LE(std::fabs(back[k] - row[k]), 0.5f * scale * 1.001f) << "n=" << n << " k=" << k;
        EXPECT_EQ(back[k], float(q) * scale);
      }
      EXPECT_NEAR(scale, max_abs / 7.0f, max_abs / 7.0f * 1e-3f);
      EXPECT_EQ(max_quant, 7) << "n=" << n << " block " << b;
    }
  }
}

// The nibble layout of kernels/backend.h: in a block of n values, value i < ceil(n/2) is
// the low nibble of byte i, value ceil(n/2) + i the high nibble; an unused nibble is 0.
TEST(Q4_0Test, NibbleLayout) {
  // 35 values: a whole block (16 bytes) and a 3-value block (2 bytes).
  std::vector<float> row(35);
  for (int k = 0; k < 35; ++k) row[k] = float(k % 15 - 7);  // Quants -7..7, scale 1.
  row[31] = 7.0f;
  std::vector<uint8_t> packed(Q4BytesPerRow(35));
  std::vector<uint16_t> scales(2);
  QuantizeQ4Row(row.data(), 35, packed.data(), scales.data());
  ASSERT_EQ(packed.size(), 18u);
  EXPECT_EQ(HalfToFloat(scales[0]), 1.0f);
  EXPECT_EQ(packed[0], uint8_t(((row[16] + 8) * 16) + (row[0] + 8)));
  EXPECT_EQ(packed[15], uint8_t(((row[31] + 8) * 16) + (row[15] + 8)));
  // Last block: values 32, 33 in low nibbles, 34 in the high nibble of byte 16.
  const float s = HalfToFloat(scales[1]);
  auto nib = [&](int k) { return int(std::round(row[k] / s)) + 8; };
  EXPECT_EQ(packed[16], uint8_t(nib(34) * 16 + nib(32)));
  EXPECT_EQ(packed[17], uint8_t(nib(33)));  // High nibble unused: 0.
}

TEST(Q4_0Test, ZeroBlockAndSaturation) {
  std::vector<float> row(64, 0.0f);
  row[40] = -3.0f;
  row[41] = 3.0f;
  std::vector<uint8_t> packed(32);
  std::vector<uint16_t> scales(2);
  QuantizeQ4Row(row.data(), 64, packed.data(), scales.data());
  EXPECT_EQ(HalfToFloat(scales[0]), 0.0f);
  for (int k = 0; k < 32; ++k) EXPECT_EQ(Q4QuantAt(packed.data(), 64, k), 0);
  EXPECT_EQ(Q4QuantAt(packed.data(), 64, 40), -7);
  EXPECT_EQ(Q4QuantAt(packed.data(), 64, 41), 7);
  // Re-quantizing the dequantized row reproduces it exactly (idempotent).
  std::vector<float> back(64);
  DequantizeQ4Row(packed.data(), scales.data(), 64, back.data());
  std::vector<uint8_t> packed2(32);
  std::vector<uint16_t> scales2(2);
  QuantizeQ4Row(back.data(), 64, packed2.data(), scales2.data());
  EXPECT_EQ(packed, packed2);
  EXPECT_EQ(scales, scales2);
}

}  // namespace
}  // namespace tandem
