// Internal to the attention kernel: how a KV cache of each KvLayout dtype is read as
// float32 (exact widening), so one templated kernel serves f32, f16 and bf16 caches.
#ifndef TANDEM_KERNELS_CPU_KV_READERS_H_
#define TANDEM_KERNELS_CPU_KV_READERS_H_

#include <cstdint>

#include "kernels/cpu/half.h"
#include "kernels/cpu/vec_math.h"

namespace tandem {
namespace cpu {

// How a cache's values are read as float32 (exact widening): At() one value; on AVX2
// Load8() 8 values and LoadPartial8() the first n (< 8 reads as zero beyond n).
struct F32Kv {
  using T = float;
  static float At(const T* p) { return *p; }
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  TANDEM_AVX2 static __m256 Load8(const T* p) { return _mm256_loadu_ps(p); }
  TANDEM_AVX2 static __m256 LoadPartial8(const T* p, int64_t n) { return LoadPartial(p, n); }
#endif
};

template <float (*kWiden)(uint16_t)>
struct HalfKv {
  using T = uint16_t;
  static float At(const T* p) { return kWiden(*p); }
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  TANDEM_AVX2 static __m256 LoadPartial8(const T* p, int64_t n) {
    alignas(32) float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n && i < 8; ++i) lanes[i] = kWiden(p[i]);
    return _mm256_load_ps(lanes);
  }
#endif
};
struct F16Kv : HalfKv<F16ToFloat> {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  TANDEM_AVX2 static __m256 Load8(const T* p) { return LoadF16x8(p); }
#endif
};
struct Bf16Kv : HalfKv<Bf16ToFloat> {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  TANDEM_AVX2 static __m256 Load8(const T* p) { return LoadBf16x8(p); }
#endif
};

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_KV_READERS_H_
