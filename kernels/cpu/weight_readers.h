// Internal to the matmul kernel: how each weight format (kernels/cpu/matmul.h's
// WeightMatrix) is read as float32. Every reader gives, for element (o, k), the same
// float32 value from its scalar At() and from its 8-lane loads, so the portable and AVX2
// kernels, templated on the reader, share one accumulation order for every format.
// AVX2 interface: the kernel walks k in steps of kStep values (a multiple of 8, starting
// at k = 0: one 64-byte cache line of the row); BlockAt(o, k) fetches the step's per-row
// state once (a pointer) and Load8(block, offset) widens the 8 values at k + offset;
// Prefetch(o, k) asks for the line holding (o, k); LoadTail(o, k, n) reads the last n < 8
// values of a row (the rest zero). AVX-512 interface: Load8Twice(block, offset) is Load8's
// 8 values in both 256-bit halves of a 512-bit register (kernels/cpu/paired_tiles.h).
#ifndef TANDEM_KERNELS_CPU_WEIGHT_READERS_H_
#define TANDEM_KERNELS_CPU_WEIGHT_READERS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/vec_math.h"

namespace tandem {
namespace cpu {

#if defined(TANDEM_HAVE_AVX2_KERNELS)
// Lanes [0, n) of a tail chunk widened through the reader's scalar At(), the rest zero.
template <typename Reader>
TANDEM_AVX2 inline __m256 WidenTail(const Reader& reader, size_t o, int k, int n) {
  alignas(32) float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < n; ++i) lanes[i] = reader.At(o, k + i);
  return _mm256_load_ps(lanes);
}
#endif

struct F32Reader {
  const float* w;
  int in_dim;
  float At(size_t o, int k) const { return w[o * in_dim + k]; }
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  static constexpr int kStep = 16;
  using Block = const float*;
  Block BlockAt(size_t o, int k) const { return w + o * in_dim + k; }
  TANDEM_AVX2 __attribute__((always_inline)) void Prefetch(size_t o, int k) const {
    PrefetchLine(w + o * in_dim + k);
  }
  TANDEM_AVX2 static __m256 Load8(Block b, int offset) { return _mm256_loadu_ps(b + offset); }
  TANDEM_AVX512 static __m512 Load8Twice(Block b, int offset) {
    return Twice(_mm256_loadu_ps(b + offset));
  }
  TANDEM_AVX2 __m256 LoadTail(size_t o, int k, int n) const {
    return _mm256_maskload_ps(w + o * in_dim + k, TailMask(n));
  }
#endif
};

// bfloat16: the float32 whose upper 16 bits are the stored ones (a shift).
struct Bf16Reader {
  const uint16_t* w;
  int in_dim;
  float At(size_t o, int k) const { return Bf16ToFloat(w[o * in_dim + k]); }
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  static constexpr int kStep = 32;
  using Block = const uint16_t*;
  Block BlockAt(size_t o, int k) const { return w + o * in_dim + k; }
  TANDEM_AVX2 __attribute__((always_inline)) void Prefetch(size_t o, int k) const {
    PrefetchLine(w + o * in_dim + k);
  }
  TANDEM_AVX2 static __m256 Load8(Block b, int offset) { return LoadBf16x8(b + offset); }
  TANDEM_AVX512 static __m512 Load8Twice(Block b, int offset) {
    return LoadBf16x8Twice(b + offset);
  }
  TANDEM_AVX2 __m256 LoadTail(size_t o, int k, int n) const { return WidenTail(*this, o, k, n); }
#endif
};

// IEEE half: exact widening (F16C vcvtph2ps on AVX2).
struct F16Reader {
  const uint16_t* w;
  int in_dim;
  float At(size_t o, int k) const { return F16ToFloat(w[o * in_dim + k]); }
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  static constexpr int kStep = 32;
  using Block = const uint16_t*;
  Block BlockAt(size_t o, int k) const { return w + o * in_dim + k; }
  TANDEM_AVX2 __attribute__((always_inline)) void Prefetch(size_t o, int k) const {
    PrefetchLine(w + o * in_dim + k);
  }
  TANDEM_AVX2 static __m256 Load8(Block b, int offset) { return LoadF16x8(b + offset); }
  TANDEM_AVX512 static __m512 Load8Twice(Block b, int offset) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offset));
    return _mm512_maskz_cvtph_ps(0xffff, _mm256_broadcastsi128_si256(h));  // See LoadBf16x8Twice.
  }
  TANDEM_AVX2 __m256 LoadTail(size_t o, int k, int n) const { return WidenTail(*this, o, k, n); }
#endif
};

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_WEIGHT_READERS_H_
