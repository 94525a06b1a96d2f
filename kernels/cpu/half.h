// IEEE half (f16) and bfloat16 <-> float32 conversions (exact widening; narrowing
// rounds to nearest even, overflow to infinity, NaN stays a quiet NaN). Used to widen
// checkpoint weights at upload time and for 16-bit KV caches. The functions also
// compile for CUDA devices (TANDEM_HOST_DEVICE), so the CUDA kernels round exactly as
// the CPU backend does.
#ifndef TANDEM_KERNELS_CPU_HALF_H_
#define TANDEM_KERNELS_CPU_HALF_H_

#include <cstdint>
#include <cstring>

#include "spec/host_device.h"

namespace tandem {
namespace cpu {

TANDEM_HOST_DEVICE inline float BitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

TANDEM_HOST_DEVICE inline uint32_t FloatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
#endif
}

TANDEM_HOST_DEVICE inline float Bf16ToFloat(uint16_t h) { return BitsToFloat(uint32_t(h) << 16); }

TANDEM_HOST_DEVICE inline uint16_t FloatToBf16(float f) {
  uint32_t bits = FloatToBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // Quiet NaN.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

TANDEM_HOST_DEVICE inline float F16ToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));  // Inf/NaN.
  if (exponent != 0) return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return BitsToFloat(sign);  // Signed zero.
  // Subnormal: normalise.
  int e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return BitsToFloat(sign | (uint32_t(e) << 23) | ((mantissa & 0x3ffu) << 13));
}

TANDEM_HOST_DEVICE inline uint16_t FloatToF16(float f) {
  const uint32_t bits = FloatToBits(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN.
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // Overflow -> inf.
  if (abs < 0x38800000u) {                                  // Subnormal or zero.
    if (abs < 0x33000000u) return sign;                     // Below half the min.
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const int shift = int(126 - exponent);  // 14..24 for this range.
    uint32_t value = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (value & 1u))) ++value;
    return uint16_t(sign | value);
  }
  uint32_t value = abs - 0x38000000u;  // Rebias exponent 127 -> 15.
  value += 0xfffu + ((value >> 13) & 1u);
  return uint16_t(sign | (value >> 13));
}

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_HALF_H_
