#include "model/float16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace tandem {
namespace {

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// binary16 value from its fields, evaluated in double (independent of the code under
// test): (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
double ReferenceHalf(uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  double magnitude;
  if (exponent == 31) {
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

TEST(Float16Test, KnownHalfBitPatterns) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);                  // Largest finite.
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));     // Smallest normal.
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));     // Smallest subnormal.
  EXPECT_EQ(HalfToFloat(0x03FF), std::ldexp(1023.0f, -24));  // Largest subnormal.
  EXPECT_EQ(HalfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7C01)));       // Signalling NaN stays NaN.
  EXPECT_EQ(Bits(HalfToFloat(0x8000)), 0x80000000u);  // Negative zero.

  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // Halfway to 2^16 rounds to infinity.
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // Tie to even (zero).
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);  // Above the tie.
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // Tie 1.5 ulp -> even 2.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // Tie to even.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // Tie to even (up).
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  // A float NaN whose payload lives only in low bits must not become infinity.
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(FromBits(0x7F800001u)))));
}

TEST(Float16Test, EveryHalfDecodesLikeTheReference) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const double expected = ReferenceHalf(static_cast<uint16_t>(bits));
    const float actual = HalfToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(actual)) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(static_cast<double>(actual), expected) << std::hex << bits;
    EXPECT_EQ(std::signbit(actual), (bits & 0x8000) != 0) << std::hex << bits;
    // Round trip of every non-NaN value is exact.
    ASSERT_EQ(FloatToHalf(actual), bits) << std::hex << bits;
  }
}

// Nearest half by search over all finite non-negative halves, ties to even mantissa.
uint16_t ReferenceFloatToHalf(float value) {
  static const std::vector<double> positives = [] {
    std::vector<double> values;
    for (uint16_t bits = 0; bits <= 0x7BFF; ++bits) values.push_back(ReferenceHalf(bits));
    return values;
  }();
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double magnitude = std::fabs(static_cast<double>(value));
  // Values at or beyond 65520 (halfway between 65504 and 2^16) overflow.
  if (magnitude >= 65520.0) return sign | 0x7C00;
  auto upper = std::lower_bound(positives.begin(), positives.end(), magnitude);
  if (upper == positives.begin()) return sign;
  uint16_t high = static_cast<uint16_t>(upper - positives.begin());
  if (upper == positives.end()) return sign | 0x7BFF;
  if (*upper == magnitude) return sign | high;
  const uint16_t low = high - 1;
  const double below = magnitude - positives[low], above = positives[high] - magnitude;
  if (below < above) return sign | low;
  if (above < below) return sign | high;
  return sign | ((low & 1) ? high : low);
}

TEST(Float16Test, RandomFloatsRoundLikeTheReference) {
  std::mt19937 random(1234);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_real_distribution<float> exponent(-28.0f, 17.0f);
  for (int i = 0; i < 200000; ++i) {
    float value;
    if (i % 2 == 0) {
      // Magnitudes spread over the half range, including subnormals and overflow.
      value = std::exp2(exponent(random)) * (i % 4 == 0 ? 1.0f : -1.0f);
    } else {
      value = FromBits(any_bits(random));
      if (std::isnan(value)) continue;
    }
    ASSERT_EQ(FloatToHalf(value), ReferenceFloatToHalf(value)) << value;
#if defined(__FLT16_MANT_DIG__)
    // The compiler's own conversion is a second, independent reference.
    const _Float16 compiler_half = static_cast<_Float16>(value);
    uint16_t compiler_bits;
    std::memcpy(&compiler_bits, &compiler_half, sizeof(compiler_bits));
    ASSERT_EQ(FloatToHalf(value), compiler_bits) << value;
#endif
  }
}

TEST(BFloat16Test, KnownBitPatterns) {
  EXPECT_EQ(BFloat16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xC040), -3.0f);
  EXPECT_EQ(BFloat16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(BFloat16ToFloat(0x7F7F), 3.3895313892515355e38f);  // Largest finite.
  EXPECT_EQ(BFloat16ToFloat(0x0001), std::ldexp(1.0f, -133));  // Smallest subnormal.
  EXPECT_EQ(BFloat16ToFloat(0x0080), std::ldexp(1.0f, -126));  // Smallest normal.
  EXPECT_EQ(BFloat16ToFloat(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(BFloat16ToFloat(0xFF80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(0x7FC0)));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(0x7F81)));
  EXPECT_EQ(Bits(BFloat16ToFloat(0x8000)), 0x80000000u);

  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(3.14159265f), 0x4049);            // 3.140625 is nearest.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3F808000u)), 0x3F80);  // Tie, even stays.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3F818000u)), 0x3F82);  // Tie, odd rounds up.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3F808001u)), 0x3F81);  // Above the tie.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x7F7FFFFFu)), 0x7F80);  // Overflow to infinity.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x00008000u)), 0x0000);  // Subnormal tie to even.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x00018000u)), 0x0002);
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::infinity()), 0xFF80);
  // NaN with payload only in the low half stays NaN (would round to infinity).
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(FromBits(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(FromBits(0xFFC00000u)))));
}

TEST(BFloat16Test, RoundTripsEveryValueAndRoundsRandomFloatsToNearest) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float value = BFloat16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(value)) continue;
    ASSERT_EQ(FloatToBFloat16(value), bits) << std::hex << bits;
  }
  std::mt19937 random(99);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 100000; ++i) {
    const float value = FromBits(any_bits(random));
    if (!std::isfinite(value)) continue;
    // Reference: the bf16 neighbours of |value| are its truncation and the next value
    // one bf16 ulp above (2^128 for the largest binade, i.e. infinity); pick the
    // nearer in double, ties to the even one.
    const double magnitude = std::fabs(static_cast<double>(value));
    const uint32_t truncated = Bits(std::fabs(value)) & 0xFFFF0000u;
    const int exponent = static_cast<int>(truncated >> 23);
    const double ulp = exponent == 0 ? std::ldexp(1.0, -133) : std::ldexp(1.0, exponent - 134);
    const double down = FromBits(truncated), up = down + ulp;
    uint16_t expected = static_cast<uint16_t>(truncated >> 16);
    if (up - magnitude < magnitude - down ||
        (up - magnitude == magnitude - down && (expected & 1))) {
      ++expected;
    }
    if (std::signbit(value)) expected |= 0x8000;
    ASSERT_EQ(FloatToBFloat16(value), expected) << value;
  }
}

}  // namespace
}  // namespace tandem
