#include "model/float16.h"

#include <cstring>

namespace tandem {
namespace {

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1F) {  // Infinity or NaN (payload kept, shifted into place).
    return BitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return BitsToFloat(sign);  // Signed zero.
    // Subnormal: value = mantissa * 2^-24. Normalise into a float.
    int float_exponent = 127 - 15 + 1;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --float_exponent;
    }
    mantissa &= 0x3FFu;
    return BitsToFloat(sign | (static_cast<uint32_t>(float_exponent) << 23) | (mantissa << 13));
  }
  return BitsToFloat(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

uint16_t FloatToHalf(float value) {
  const uint32_t bits = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t float_exponent = (bits >> 23) & 0xFFu;
  const uint32_t float_mantissa = bits & 0x7FFFFFu;
  if (float_exponent == 0xFF) {
    if (float_mantissa == 0) return sign | 0x7C00u;  // Infinity.
    // NaN: keep the top payload bits and force the quiet bit so it stays a NaN.
    return sign | 0x7E00u | static_cast<uint16_t>(float_mantissa >> 13);
  }
  const int exponent = static_cast<int>(float_exponent) - 127 + 15;
  if (exponent >= 0x1F) return sign | 0x7C00u;  // Overflow to infinity.
  if (exponent <= 0) {
    // Result is subnormal or zero: shift the full significand (with the implicit
    // one) right and round to nearest even.
    if (exponent < -10) return sign;  // Below half of the smallest subnormal.
    const uint32_t significand = float_mantissa | 0x800000u;
    const int shift = 14 - exponent;  // 13 mantissa bits + (1 - exponent).
    uint32_t half_mantissa = significand >> shift;
    const uint32_t remainder = significand & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u))) {
      ++half_mantissa;  // May carry into the smallest normal: still correct bits.
    }
    return sign | static_cast<uint16_t>(half_mantissa);
  }
  uint32_t half = (static_cast<uint32_t>(exponent) << 10) | (float_mantissa >> 13);
  const uint32_t remainder = float_mantissa & 0x1FFFu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u))) {
    ++half;  // A carry into the exponent rounds up to the next binade or infinity.
  }
  return sign | static_cast<uint16_t>(half);
}

float BFloat16ToFloat(uint16_t bits) { return BitsToFloat(static_cast<uint32_t>(bits) << 16); }

uint16_t FloatToBFloat16(float value) {
  const uint32_t bits = FloatBits(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // Quiet NaN.
  }
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace tandem
