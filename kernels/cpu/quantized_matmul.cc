#include "kernels/cpu/quantized_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "glog/logging.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/quantized_matmul_vnni.h"
#include "kernels/cpu/vec_math.h"

namespace tandem {
namespace cpu {
namespace {

constexpr int kBlock = kQ8BlockSize;

// ---- activation quantization ----

// The scale and reciprocal of a block with max |x| = `max_abs`; NaN scale when the block
// holds a non-finite value; a zero block (scale and reciprocal 0) when max_abs is zero
// or so small (below about 1e-36) that 1 / scale overflows.
struct BlockScale {
  float scale;
  float inverse;
};
inline BlockScale ScaleOf(float max_abs, bool finite) {
  if (!finite) return {std::numeric_limits<float>::quiet_NaN(), 0.0f};
  const float scale = max_abs / 127.0f;
  const float inverse = max_abs != 0.0f ? 1.0f / scale : 0.0f;
  if (!(inverse <= std::numeric_limits<float>::max())) return {0.0f, 0.0f};
  return {scale, inverse};
}

inline int8_t QuantOf(float value, float inverse) {
  const float rounded = std::nearbyint(value * inverse);
  return static_cast<int8_t>(std::clamp(rounded, -127.0f, 127.0f));
}

void QuantizeRowPortable(const float* x, int cols, int8_t* quants, float* scales) {
  for (int b = 0, k0 = 0; k0 < cols; ++b, k0 += kBlock) {
    const int n = std::min(kBlock, cols - k0);
    float max_abs = 0.0f;
    bool finite = true;
    for (int i = 0; i < n; ++i) {
      const float a = std::fabs(x[k0 + i]);
      finite = finite && a < std::numeric_limits<float>::infinity();
      max_abs = a > max_abs ? a : max_abs;
    }
    const BlockScale s = ScaleOf(max_abs, finite);
    scales[b] = s.scale;
    if (!finite) continue;  // Zero quants (the buffer starts zeroed).
    for (int i = 0; i < n; ++i) quants[k0 + i] = QuantOf(x[k0 + i], s.inverse);
  }
}

#if defined(TANDEM_HAVE_AVX2_KERNELS)

// The same math as QuantizeRowPortable: max is exact in any order, the multiply is one
// IEEE rounding, vroundps rounds to nearest even like nearbyint.
TANDEM_AVX2 void QuantizeRowAvx2(const float* x, int cols, int8_t* quants, float* scales) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  for (int b = 0, k0 = 0; k0 < cols; ++b, k0 += kBlock) {
    const int n = std::min(kBlock, cols - k0);
    __m256 v[4];
    __m256 max_abs = _mm256_setzero_ps(), not_finite = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = n > 8 * i ? LoadPartial(x + k0 + 8 * i, n - 8 * i) : _mm256_setzero_ps();
      const __m256 a = _mm256_and_ps(v[i], abs_mask);
      not_finite = _mm256_or_ps(not_finite, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ));
      max_abs = _mm256_max_ps(max_abs, a);
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(max_abs), _mm256_extractf128_ps(max_abs, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    const bool finite = _mm256_movemask_ps(not_finite) == 0;
    const BlockScale s = ScaleOf(_mm_cvtss_f32(m), finite);
    scales[b] = s.scale;
    if (!finite) continue;  // Zero quants (the buffer starts zeroed).
    const __m256 inverse = _mm256_set1_ps(s.inverse);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      const __m256 scaled = _mm256_round_ps(_mm256_mul_ps(v[i], inverse),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(scaled), lo), hi);
    }
    // packs interleaves 128-bit lanes; the permute restores value order.
    const __m256i packed =
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    alignas(32) int8_t block[kBlock];
    _mm256_store_si256(reinterpret_cast<__m256i*>(block), ordered);
    std::memcpy(quants + k0, block, n);
  }
}

#endif  // TANDEM_HAVE_AVX2_KERNELS

// ---- portable dot products ----

// The documented order, element by element, through the tiles' scalar accessors.
void RangePortable(const QuantizedRows& x, const QuantizedTiles& w, int col_begin, int col_end,
                   float* out) {
  for (int r = 0; r < x.rows; ++r) {
    const int8_t* xq = x.RowQuants(r);
    const float* xs = x.RowScales(r);
    for (int o = col_begin; o < col_end; ++o) {
      float acc = 0.0f;
      for (int b = 0; b < x.blocks_per_row; ++b) {
        int32_t sum = 0;
        for (int k = kBlock * b; k < kBlock * (b + 1); ++k) {
          sum += int32_t(w.Quant(o, k)) * int32_t(xq[k]);
        }
        acc = std::fma(float(sum), w.Scale(o, b) * xs[b], acc);
      }
      out[size_t(r) * w.out_dim + o] = acc;
    }
  }
}

#if defined(TANDEM_HAVE_AVX2_KERNELS)

// ---- AVX2 dot products: 8 columns per vector (half a tile), lanes = columns ----

// Group u (values 4u..4u+3 of the block) of the 8 columns of half `half` as signed int8,
// 4 per column, from the block's first line `line0` (lines `stride` bytes apart).
template <DType kFormat>
TANDEM_AVX2 inline __m256i SignedGroup(const uint8_t* line0, size_t stride, int half, int u) {
  if constexpr (kFormat == DType::kQ8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line0 + stride * u + 32 * half));
  } else {
    const __m256i bytes =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line0 + stride * (u & 3) + 32 * half));
    const __m256i nibbles = u < 4 ? bytes : _mm256_srli_epi16(bytes, 4);
    return _mm256_sub_epi8(_mm256_and_si256(nibbles, _mm256_set1_epi8(15)), _mm256_set1_epi8(8));
  }
}

// Rows [row0, row0 + RB) (RB <= 4: the accumulators, block sums and temporaries fit the
// 16 registers) against the 8 columns of half `half` of tile t: per block, each row's
// block sums per column (per group u: maddubs of |x| with sign(w, x), pairs at most
// 2 * 127 * 127 as int16, madd with ones, added in int32), converted, one FMA by
// d_w * d_x; written for the columns in [lo, hi).
template <int RB, DType kFormat>
TANDEM_AVX2 void HalfTile(const QuantizedRows& x, int row0, const QuantizedTiles& w, int t,
                          int half, int lo, int hi, float* out) {
  __m256 acc[RB];
#pragma GCC unroll 4
  for (int r = 0; r < RB; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int b = 0; b < x.blocks_per_row; ++b) {
    const uint8_t* line0 = w.Line(t, b, 0);
    __m256i sums[RB];
#pragma GCC unroll 4
    for (int r = 0; r < RB; ++r) sums[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) {
      const __m256i wg = SignedGroup<kFormat>(line0, w.LineStride(), half, u);
#pragma GCC unroll 4
      for (int r = 0; r < RB; ++r) {
        int32_t group;
        std::memcpy(&group, x.RowQuants(row0 + r) + kBlock * b + 4 * u, 4);
        const __m256i xg = _mm256_set1_epi32(group);
        const __m256i pairs =
            _mm256_maddubs_epi16(_mm256_sign_epi8(xg, xg), _mm256_sign_epi8(wg, xg));
        sums[r] = _mm256_add_epi32(sums[r], _mm256_madd_epi16(pairs, ones));
      }
    }
    const __m128i scales =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.BlockScales(t, b) + 8 * half));
    const __m256 dw = _mm256_cvtph_ps(scales);
#pragma GCC unroll 4
    for (int r = 0; r < RB; ++r) {
      const __m256 d = _mm256_mul_ps(dw, _mm256_broadcast_ss(x.RowScales(row0 + r) + b));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[r]), d, acc[r]);
    }
  }
  const int first = t * kTileColumns + 8 * half;
  for (int r = 0; r < RB; ++r) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc[r]);
    for (int c = std::max(lo, first); c < std::min(hi, first + 8); ++c) {
      out[size_t(row0 + r) * w.out_dim + c] = lanes[c - first];
    }
  }
}

// Every tile meeting [col_begin, col_end), half by half, rows in blocks of up to 4.
template <DType kFormat>
TANDEM_AVX2 void RangeAvx2(const QuantizedRows& x, const QuantizedTiles& w, int col_begin,
                           int col_end, float* out) {
  for (int t = col_begin / kTileColumns; t * kTileColumns < col_end; ++t) {
    for (int half = 0; half < 2; ++half) {
      const int first = t * kTileColumns + 8 * half;
      if (first >= col_end || first + 8 <= col_begin) continue;
      for (int r = 0; r < x.rows; r += 4) {
        switch (std::min(4, x.rows - r)) {
          case 1:
            HalfTile<1, kFormat>(x, r, w, t, half, col_begin, col_end, out);
            break;
          case 2:
            HalfTile<2, kFormat>(x, r, w, t, half, col_begin, col_end, out);
            break;
          case 3:
            HalfTile<3, kFormat>(x, r, w, t, half, col_begin, col_end, out);
            break;
          default:
            HalfTile<4, kFormat>(x, r, w, t, half, col_begin, col_end, out);
        }
      }
    }
  }
}

#endif  // TANDEM_HAVE_AVX2_KERNELS

}  // namespace

void QuantizeRows(SimdLevel level, const float* x, int rows, int cols, QuantizedRows* out) {
  out->rows = rows;
  out->cols = cols;
  out->blocks_per_row = static_cast<int>(Q8BlocksPerRow(cols));
  const size_t stride = size_t(out->blocks_per_row) * kBlock;
  out->quants.assign(size_t(rows) * stride, 0);
  out->scales.assign(size_t(rows) * out->blocks_per_row, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = x + size_t(r) * cols;
    int8_t* quants = out->quants.data() + size_t(r) * stride;
    float* scales = out->scales.data() + size_t(r) * out->blocks_per_row;
#if defined(TANDEM_HAVE_AVX2_KERNELS)
    if (UsesAvx2(level)) {
      QuantizeRowAvx2(row, cols, quants, scales);
      continue;
    }
#endif
    QuantizeRowPortable(row, cols, quants, scales);
  }
  out->block_sums.clear();
  if (level == SimdLevel::kAvx512Vnni) {
    out->block_sums.resize(out->quants.size() / kBlock);
    for (size_t b = 0; b < out->block_sums.size(); ++b) {
      int32_t sum = 0;
      for (int i = 0; i < kBlock; ++i) sum += out->quants[b * kBlock + i];
      out->block_sums[b] = sum;
    }
  }
}

void QuantizedMatMulRange(SimdLevel level, const QuantizedRows& x, const QuantizedTiles& w,
                          int col_begin, int col_end, float* out) {
  CHECK_EQ(w.in_dim, x.cols) << "QuantizedMatMulRange: weight and activation widths differ";
  col_end = std::min(col_end, w.out_dim);
  if (col_begin >= col_end || x.rows <= 0) return;
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (level == SimdLevel::kAvx512Vnni) {
    return quantized_internal::RangeVnni(x, w, col_begin, col_end, out);
  }
  if (UsesAvx2(level)) {
    return w.dtype == DType::kQ4_0 ? RangeAvx2<DType::kQ4_0>(x, w, col_begin, col_end, out)
                                   : RangeAvx2<DType::kQ8_0>(x, w, col_begin, col_end, out);
  }
#endif
  RangePortable(x, w, col_begin, col_end, out);
}

}  // namespace cpu
}  // namespace tandem
