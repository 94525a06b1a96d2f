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
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int b = 0; b < x.blocks_per_row; ++b) {
        const float d = w.Scale(o, b) * xs[b];
        for (int j = 0; j < 8; ++j) {
          int32_t partial = 0;
          for (int k = kBlock * b + 4 * j; k < kBlock * b + 4 * j + 4; ++k) {
            partial += int32_t(w.Quant(o, k)) * int32_t(xq[k]);
          }
          acc[j] = std::fma(float(partial), d, acc[j]);
        }
      }
      out[size_t(r) * w.out_dim + o] = ReduceTree8(acc);
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

// The fixed tree across the 8 lane vectors: column c of the result is its output.
TANDEM_AVX2 inline __m256 SumLanes(const __m256 (&acc)[8]) {
  return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[1], acc[5])),
                       _mm256_add_ps(_mm256_add_ps(acc[2], acc[6]), _mm256_add_ps(acc[3], acc[7])));
}

// Writes the outputs `sums` of row r and the 8 columns of half `half` of tile t that lie
// in [lo, hi).
TANDEM_AVX2 inline void StoreColumns(int r, const QuantizedTiles& w, int t, int half, int lo,
                                     int hi, __m256 sums, float* out) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sums);
  const int first = t * kTileColumns + 8 * half;
  for (int c = std::max(lo, first); c < std::min(hi, first + 8); ++c) {
    out[size_t(r) * w.out_dim + c] = lanes[c - first];
  }
}

// Row r against the 8 columns of half `half` of tile t: per block and group u, the
// column sums of x * w over the group's 4 values (maddubs of |x| with sign(w, x), pairs
// at most 2 * 127 * 127 as int16, then madd with ones), converted, fma into lane u; then
// the fixed tree across the 8 lane vectors, written for the columns in [lo, hi).
template <DType kFormat>
TANDEM_AVX2 void HalfTile(const QuantizedRows& x, int r, const QuantizedTiles& w, int t, int half,
                          int lo, int hi, float* out) {
  __m256 acc[8];
#pragma GCC unroll 8
  for (int u = 0; u < 8; ++u) acc[u] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* xq = x.RowQuants(r);
  const float* xs = x.RowScales(r);
  for (int b = 0; b < x.blocks_per_row; ++b) {
    const uint8_t* line0 = w.Line(t, b, 0);
    const __m128i scales =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.BlockScales(t, b) + 8 * half));
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(scales), _mm256_broadcast_ss(xs + b));
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) {
      int32_t group;
      std::memcpy(&group, xq + kBlock * b + 4 * u, 4);
      const __m256i xg = _mm256_set1_epi32(group);
      const __m256i wg = SignedGroup<kFormat>(line0, w.LineStride(), half, u);
      const __m256i pairs =
          _mm256_maddubs_epi16(_mm256_sign_epi8(xg, xg), _mm256_sign_epi8(wg, xg));
      const __m256 partial = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
      acc[u] = _mm256_fmadd_ps(partial, d, acc[u]);
    }
  }
  StoreColumns(r, w, t, half, lo, hi, SumLanes(acc), out);
}

// Rows [row0, row0 + RB) against both halves of tile t in one pass over its weights
// (verification's few rows): the same operations per element as HalfTile, with the
// accumulators on the stack (RB x 16 lane vectors do not fit the 16 registers), so each
// weight group is loaded once for all rows and |x| once for both halves.
template <int RB, DType kFormat>
TANDEM_AVX2 void TileRows(const QuantizedRows& x, int row0, const QuantizedTiles& w, int t, int lo,
                          int hi, float* out) {
  alignas(32) float acc[RB][2][8][8] = {};  // [row][half][group u][column]
  alignas(32) float d[RB][2][8];
  const __m256i ones = _mm256_set1_epi16(1);
  for (int b = 0; b < x.blocks_per_row; ++b) {
    const uint8_t* line0 = w.Line(t, b, 0);
    const uint16_t* scales = w.BlockScales(t, b);
    for (int r = 0; r < RB; ++r) {
      const __m256 dx = _mm256_broadcast_ss(x.RowScales(row0 + r) + b);
      for (int h = 0; h < 2; ++h) {
        const __m128i dw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 8 * h));
        _mm256_store_ps(d[r][h], _mm256_mul_ps(_mm256_cvtph_ps(dw), dx));
      }
    }
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) {
      const __m256i wg[2] = {SignedGroup<kFormat>(line0, w.LineStride(), 0, u),
                             SignedGroup<kFormat>(line0, w.LineStride(), 1, u)};
#pragma GCC unroll 8
      for (int r = 0; r < RB; ++r) {
        int32_t group;
        std::memcpy(&group, x.RowQuants(row0 + r) + kBlock * b + 4 * u, 4);
        const __m256i xg = _mm256_set1_epi32(group), xa = _mm256_sign_epi8(xg, xg);
        for (int h = 0; h < 2; ++h) {
          const __m256i pairs = _mm256_maddubs_epi16(xa, _mm256_sign_epi8(wg[h], xg));
          const __m256 partial = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
          _mm256_store_ps(acc[r][h][u], _mm256_fmadd_ps(partial, _mm256_load_ps(d[r][h]),
                                                        _mm256_load_ps(acc[r][h][u])));
        }
      }
    }
  }
  for (int r = 0; r < RB; ++r) {
    for (int h = 0; h < 2; ++h) {
      __m256 a[8];
      for (int u = 0; u < 8; ++u) a[u] = _mm256_load_ps(acc[r][h][u]);
      StoreColumns(row0 + r, w, t, h, lo, hi, SumLanes(a), out);
    }
  }
}

// Rows [row0, row0 + rows) of tile t for rows in 2..kMaxPassRows.
constexpr int kMaxPassRows = 8;

template <DType kFormat>
TANDEM_AVX2 void TileRowsAnyCount(int rows, const QuantizedRows& x, int row0,
                                  const QuantizedTiles& w, int t, int lo, int hi, float* out) {
  switch (rows) {
    case 2:
      return TileRows<2, kFormat>(x, row0, w, t, lo, hi, out);
    case 3:
      return TileRows<3, kFormat>(x, row0, w, t, lo, hi, out);
    case 4:
      return TileRows<4, kFormat>(x, row0, w, t, lo, hi, out);
    case 5:
      return TileRows<5, kFormat>(x, row0, w, t, lo, hi, out);
    case 6:
      return TileRows<6, kFormat>(x, row0, w, t, lo, hi, out);
    case 7:
      return TileRows<7, kFormat>(x, row0, w, t, lo, hi, out);
    default:
      return TileRows<8, kFormat>(x, row0, w, t, lo, hi, out);
  }
}

// Every tile meeting [col_begin, col_end): a single row half by half with register
// accumulators; more rows in passes of up to kMaxPassRows (a last pass of one row
// goes half by half too).
template <DType kFormat>
TANDEM_AVX2 void RangeAvx2(const QuantizedRows& x, const QuantizedTiles& w, int col_begin,
                           int col_end, float* out) {
  for (int t = col_begin / kTileColumns; t * kTileColumns < col_end; ++t) {
    for (int r = 0; r < x.rows; r += kMaxPassRows) {
      const int rows = std::min(kMaxPassRows, x.rows - r);
      if (rows > 1) {
        TileRowsAnyCount<kFormat>(rows, x, r, w, t, col_begin, col_end, out);
        continue;
      }
      for (int half = 0; half < 2; ++half) {
        const int first = t * kTileColumns + 8 * half;
        if (first < col_end && first + 8 > col_begin) {
          HalfTile<kFormat>(x, r, w, t, half, col_begin, col_end, out);
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
  out->starts_q8.clear();
  out->starts_q4.clear();
  if (level == SimdLevel::kAvx512Vnni) {
    out->starts_q8.resize(out->quants.size() / 4);
    out->starts_q4.resize(out->quants.size() / 4);
    for (size_t g = 0; g < out->starts_q8.size(); ++g) {
      const int8_t* q = out->quants.data() + 4 * g;
      const int32_t sum = int32_t(q[0]) + q[1] + q[2] + q[3];
      out->starts_q8[g] = -128 * sum;
      out->starts_q4[g] = -8 * sum;
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
