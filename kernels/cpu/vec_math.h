// Internal building blocks shared by the CPU kernels: the fixed 8-lane reduction tree
// used by every dot product, and exp. The portable (scalar) and AVX2 forms perform the
// same tree, so a kernel's reduction order never depends on which rows or lanes an
// element happens to be computed with.
//
// Reduction tree of an 8-lane accumulator a[0..7]:
//   s_i = a_i + a_{i+4} (i < 4);  result = (s_0 + s_1) + (s_2 + s_3).
#ifndef TANDEM_KERNELS_CPU_VEC_MATH_H_
#define TANDEM_KERNELS_CPU_VEC_MATH_H_

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#define TANDEM_HAVE_AVX2_KERNELS 1
#define TANDEM_AVX2 __attribute__((target("avx2,fma,f16c")))
// The float kernels' AVX-512 level (kernels/cpu/simd.h's kAvx512Vnni implies these).
#define TANDEM_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#endif

namespace tandem {
namespace cpu {

// Sums 8 partial sums with the fixed tree above.
inline float ReduceTree8(const float a[8]) {
  const float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
  return (s0 + s1) + (s2 + s3);
}

// Number of 8-wide chunks covering n elements.
inline int64_t Chunks8(int64_t n) { return (n + 7) / 8; }

#if defined(TANDEM_HAVE_AVX2_KERNELS)

// Mask whose first n (0..8) 32-bit lanes are set.
TANDEM_AVX2 inline __m256i TailMask(int n) {
  alignas(32) static const int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - n));
}

// Loads min(n, 8) floats (the rest read as zero) without touching memory past them.
TANDEM_AVX2 inline __m256 LoadPartial(const float* p, int64_t n) {
  if (n >= 8) return _mm256_loadu_ps(p);
  return _mm256_maskload_ps(p, TailMask(static_cast<int>(n)));
}

// Stores min(n, 8) lanes.
TANDEM_AVX2 inline void StorePartial(float* p, int64_t n, __m256 v) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
  } else {
    _mm256_maskstore_ps(p, TailMask(static_cast<int>(n)), v);
  }
}

// Asks for the cache line holding p into L2 (a hint: never faults). Always inlined: GCC
// 12 deletes a call to an out-of-line function that only prefetches (it counts as pure).
TANDEM_AVX2 __attribute__((always_inline)) inline void PrefetchLine(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
}

// Returns v, which the compiler must hold in a register: a value used by several
// multiply-adds is then loaded once instead of folded into each of them as a memory
// operand (more loads than the load ports sustain in the row-blocked matmul tiles).
TANDEM_AVX2 inline __m256 InRegister(__m256 v) {
  asm("" : "+x"(v));
  return v;
}

// 8 bfloat16 values at p widened to float32 (exact: each value becomes the upper half of
// its float32, the lower half zero). The 16 bytes are broadcast to both 128-bit halves (a
// load) and one byte shuffle places values 0-3 (low half) and 4-7 (high half): one ALU
// operation, off the FMA ports on current cores, instead of a zero-extend and a shift.
TANDEM_AVX2 inline __m256 LoadBf16x8(const uint16_t* p) {
  const __m256i h =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i place =
      _mm256_setr_epi8(-128, -128, 0, 1, -128, -128, 2, 3, -128, -128, 4, 5, -128, -128, 6, 7, -128,
                       -128, 8, 9, -128, -128, 10, 11, -128, -128, 12, 13, -128, -128, 14, 15);
  return _mm256_castsi256_ps(_mm256_shuffle_epi8(h, place));
}

// v in both 256-bit halves (a vector shuffle the compiler folds into a broadcast load).
TANDEM_AVX512 inline __m512 Twice(__m256 v) {
  return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
}

// LoadBf16x8's 8 values in both 256-bit halves: the 16 bytes broadcast to the four
// 128-bit lanes and the same byte shuffle in each pair of lanes.
TANDEM_AVX512 inline __m512 LoadBf16x8Twice(const uint16_t* p) {
  // The all-lanes mask forms: the unmasked intrinsics trip GCC 12's -Wmaybe-uninitialized.
  const __m512i h =
      _mm512_maskz_broadcast_i32x4(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i place = _mm512_set_epi64(
      0x0f0e8080'0d0c8080, 0x0b0a8080'09088080, 0x07068080'05048080, 0x03028080'01008080,
      0x0f0e8080'0d0c8080, 0x0b0a8080'09088080, 0x07068080'05048080, 0x03028080'01008080);
  return _mm512_castsi512_ps(_mm512_shuffle_epi8(h, place));
}

// 8 IEEE half values at p widened to float32 (exact, F16C).
TANDEM_AVX2 inline __m256 LoadF16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

TANDEM_AVX2 inline __m128 Fold8To4(__m256 a) {
  return _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
}

// Lane i of the result is the ReduceTree8 of argument i.
TANDEM_AVX2 inline __m128 Reduce4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m128 ab = _mm_hadd_ps(Fold8To4(a), Fold8To4(b));
  const __m128 cd = _mm_hadd_ps(Fold8To4(c), Fold8To4(d));
  return _mm_hadd_ps(ab, cd);
}

// ReduceTree8 of one accumulator.
TANDEM_AVX2 inline float Reduce1(__m256 a) {
  __m128 s = Fold8To4(a);
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(s);
}

// Writes each accumulator's ReduceTree8 (Reduce4 per group of four columns) to
// out[r * out_dim + c].
template <int RB, int CB>
TANDEM_AVX2 inline void StoreTile(const __m256 (&acc)[RB][CB], float* out, int out_dim) {
  const __m256 zero = _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
    float* o = out + size_t(r) * out_dim;
#pragma GCC unroll 8
    for (int c = 0; c < CB; c += 4) {
      const __m128 sums =
          Reduce4(acc[r][c], c + 1 < CB ? acc[r][c + 1] : zero, c + 2 < CB ? acc[r][c + 2] : zero,
                  c + 3 < CB ? acc[r][c + 3] : zero);
      if (c + 4 <= CB) {
        _mm_storeu_ps(o + c, sums);
      } else {
        alignas(16) float tmp[4];
        _mm_store_ps(tmp, sums);
        for (int i = 0; c + i < CB; ++i) o[c + i] = tmp[i];
      }
    }
  }
}

// exp(x) per lane (Cephes polynomial, ~2 ulp). Results below FLT_MIN flush to 0,
// large inputs saturate near FLT_MAX, NaN propagates.
TANDEM_AVX2 inline __m256 Exp8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f);
  const __m256 lo = _mm256_set1_ps(-87.0f);
  const __m256 tiny = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  __m256 v = _mm256_min_ps(hi, x);
  v = _mm256_max_ps(lo, v);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), v);
  v = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), v);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, v, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, v, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, v, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, v, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, v, _mm256_set1_ps(5.0000001201E-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(v, v), _mm256_add_ps(v, _mm256_set1_ps(1.0f)));
  const __m256i exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(exponent));
  return _mm256_andnot_ps(tiny, y);
}

#endif  // TANDEM_HAVE_AVX2_KERNELS

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_VEC_MATH_H_
