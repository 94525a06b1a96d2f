#include "kernels/cpu/half.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace tandem {
namespace cpu {
namespace {

TEST(HalfTest, F16KnownEncodings) {
  EXPECT_EQ(F16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(F16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(F16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToFloat(0x0001), std::ldexp(1.0f, -24));  // Smallest subnormal.
  EXPECT_EQ(F16ToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(F16ToFloat(0x3555), 0.25f * (1.0f + 0x155 / 1024.0f));  // ~1/3
  EXPECT_TRUE(std::signbit(F16ToFloat(0x8000)));
  EXPECT_EQ(F16ToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(F16ToFloat(0x7e00)));
}

TEST(HalfTest, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F16ToFloat(uint16_t(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToF16(f), h) << std::hex << h;
  }
}

TEST(HalfTest, F16RoundsToNearestEven) {
  EXPECT_EQ(FloatToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // Halfway, even stays.
  EXPECT_EQ(FloatToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToF16(70000.0f), 0x7c00);
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -25)), 0x0000);  // Halfway to min: even.
  EXPECT_EQ(FloatToF16(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(HalfTest, Bf16) {
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xc0a0), -5.0f);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Bf16ToFloat(uint16_t(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBf16(f), h) << std::hex << h;
  }
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // Halfway, to even.
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
