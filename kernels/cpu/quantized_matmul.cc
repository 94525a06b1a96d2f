#include "kernels/cpu/quantized_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/half.h"
#include "kernels/cpu/quantized_blocks.h"
#include "kernels/cpu/vec_math.h"

namespace tandem {
namespace cpu {
namespace {

using quantized_internal::kBlock;
using quantized_internal::Q4Blocks;
using quantized_internal::Q8Blocks;

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

template <typename Blocks>
void RangePortable(const QuantizedRows& x, const Blocks& w, int out_dim, int col_begin, int col_end,
                   float* out) {
  int8_t wq[kBlock];
  for (int r = 0; r < x.rows; ++r) {
    const int8_t* xq = x.RowQuants(r);
    const float* xs = x.RowScales(r);
    for (int o = col_begin; o < col_end; ++o) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int b = 0; b < x.blocks_per_row; ++b) {
        w.CopyBlock(size_t(o), b, wq);
        const int8_t* xb = xq + size_t(b) * kBlock;
        const float d = w.Scale(size_t(o), b) * xs[b];
        for (int j = 0; j < 8; ++j) {
          int32_t partial = 0;
          for (int i = 4 * j; i < 4 * j + 4; ++i) partial += int32_t(wq[i]) * int32_t(xb[i]);
          acc[j] = std::fma(float(partial), d, acc[j]);
        }
      }
      out[size_t(r) * out_dim + o] = ReduceTree8(acc);
    }
  }
}

#if defined(TANDEM_HAVE_AVX2_KERNELS)

// ---- AVX2 dot products ----

// Adds block b of rows [row0, row0 + RB) times the weight blocks wv (scales dw) of CB
// columns: per (row, column), the lane sums of |x| * sign(w, x) (maddubs: pairs as
// int16, at most 2 * 127 * 127; madd with ones: the 4 products of each 32-bit lane),
// converted and accumulated with one FMA by d_w * d_x.
template <int RB, int CB>
TANDEM_AVX2 inline void AccumulateBlock(const QuantizedRows& x, int row0, int b,
                                        const __m256i (&wv)[CB], const __m256 (&dw)[CB],
                                        __m256 (&acc)[RB][CB]) {
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
    const __m256i xv = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(x.RowQuants(row0 + r) + size_t(b) * kBlock));
    const __m256i xa = _mm256_sign_epi8(xv, xv);
    const __m256 dx = _mm256_broadcast_ss(x.RowScales(row0 + r) + b);
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) {
      const __m256i pairs = _mm256_maddubs_epi16(xa, _mm256_sign_epi8(wv[c], xv));
      const __m256 partial = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
      acc[r][c] = _mm256_fmadd_ps(partial, _mm256_mul_ps(dw[c], dx), acc[r][c]);
    }
  }
}

// Rows [row0, row0 + RB) against columns [col, col + CB): the whole blocks (each also
// asking for a column of the next tile, PrefetchNextTileColumn), then a row's short last
// block from a zero-padded copy; then the fixed reduction.
template <int RB, int CB, typename Blocks>
TANDEM_AVX2 inline void Tile(const QuantizedRows& x, int row0, const Blocks& w, int col, float* out,
                             int out_dim) {
  __m256 acc[RB][CB];
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  __m256i wv[CB];
  __m256 dw[CB];
  for (int b = 0; b < w.full_blocks; ++b) {
    if ((b & 7) < CB) {
      quantized_internal::PrefetchNextTileColumn<CB>(w, col, out_dim, b & ~7, b & 7);
    }
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) {
      wv[c] = w.LoadFull(size_t(col) + c, b);
      dw[c] = _mm256_set1_ps(w.ScaleAvx2(size_t(col) + c, b));
    }
    AccumulateBlock(x, row0, b, wv, dw, acc);
  }
  if (w.full_blocks < x.blocks_per_row) {
    const int b = w.full_blocks;
    alignas(32) int8_t tail[kBlock];
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) {
      w.CopyBlock(size_t(col) + c, b, tail);
      wv[c] = _mm256_load_si256(reinterpret_cast<const __m256i*>(tail));
      dw[c] = _mm256_set1_ps(w.ScaleAvx2(size_t(col) + c, b));
    }
    AccumulateBlock(x, row0, b, wv, dw, acc);
  }
  StoreTile(acc, out + size_t(row0) * out_dim + col, out_dim);
}

// Tile<RB, cb> for a runtime cb in 1..CB.
template <int RB, int CB, typename Blocks>
TANDEM_AVX2 void TileUpTo(int cb, const QuantizedRows& x, int row0, const Blocks& w, int col,
                          float* out, int out_dim) {
  if constexpr (CB > 1) {
    if (cb < CB) return TileUpTo<RB, CB - 1>(cb, x, row0, w, col, out, out_dim);
  }
  Tile<RB, CB>(x, row0, w, col, out, out_dim);
}

template <int RB, int CB, typename Blocks>
TANDEM_AVX2 void Sweep(const QuantizedRows& x, int row0, const Blocks& w, int col_begin,
                       int col_end, float* out, int out_dim) {
  int c = col_begin;
  for (; c + CB <= col_end; c += CB) Tile<RB, CB>(x, row0, w, c, out, out_dim);
  if (c < col_end) TileUpTo<RB, CB>(col_end - c, x, row0, w, c, out, out_dim);
}

// Rows [row0, row0 + rb) for rb in 1..4 over columns [col_begin, col_end).
template <typename Blocks>
TANDEM_AVX2 void SweepRowsAvx2(int rb, const QuantizedRows& x, int row0, const Blocks& w,
                               int col_begin, int col_end, float* out, int out_dim) {
  switch (rb) {
    case 1:
      return Sweep<1, 4>(x, row0, w, col_begin, col_end, out, out_dim);
    case 2:
      return Sweep<2, 4>(x, row0, w, col_begin, col_end, out, out_dim);
    case 3:
      return Sweep<3, 2>(x, row0, w, col_begin, col_end, out, out_dim);
    default:
      return Sweep<4, 2>(x, row0, w, col_begin, col_end, out, out_dim);
  }
}

#endif  // TANDEM_HAVE_AVX2_KERNELS

template <typename Blocks>
void RangeAt(SimdLevel level, const QuantizedRows& x, const Blocks& w, int out_dim, int col_begin,
             int col_end, float* out) {
  if (col_begin >= col_end || x.rows <= 0) return;
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (level == SimdLevel::kAvx512Vnni) {
    return quantized_internal::RangeVnni(x, w, out_dim, col_begin, col_end, out);
  }
  if (UsesAvx2(level)) {
    return quantized_internal::ForEachRowBlock(
        x.rows, x.cols, 4, col_begin, col_end, [&](int rb, int row0, int c0, int c1) {
          SweepRowsAvx2(rb, x, row0, w, c0, c1, out, out_dim);
        });
  }
#endif
  RangePortable(x, w, out_dim, col_begin, col_end, out);
}

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
}

void Q8MatMulRange(SimdLevel level, const QuantizedRows& x, const int8_t* quants,
                   const uint16_t* scales, int out_dim, int col_begin, int col_end, float* out) {
  const Q8Blocks w{quants, scales, x.cols, x.blocks_per_row, x.cols / kBlock};
  RangeAt(level, x, w, out_dim, col_begin, col_end, out);
}

void Q4MatMulRange(SimdLevel level, const QuantizedRows& x, const uint8_t* packed,
                   const uint16_t* scales, int out_dim, int col_begin, int col_end, float* out) {
  const Q4Blocks w{packed,           scales,          x.cols,
                   x.blocks_per_row, x.cols / kBlock, Q4BytesPerRow(x.cols)};
  RangeAt(level, x, w, out_dim, col_begin, col_end, out);
}

}  // namespace cpu
}  // namespace tandem
