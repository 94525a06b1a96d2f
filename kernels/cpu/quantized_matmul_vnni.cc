// The AVX-512 VNNI path of the integer q8_0/q4_0 matmul on the tiled layout
// (kernels/cpu/quantized_tiles.h): 16 output columns per 512-bit register, compiled with
// target attributes only, so the rest of the build and the binaries need no more than
// AVX2 (quantized_matmul.cc calls this file at SimdLevel::kAvx512Vnni only).
//
// A 64-byte line of a tile block is one group of 4 values of k for the 16 columns: one
// vpdpbusd of it with the row's 4 activation quants (broadcast) adds the 16 columns'
// products of that group into 16 int32 lanes, and 8 of them (two chains of 4, added)
// make the block sums. vpdpbusd multiplies unsigned by signed bytes: the weights go in as
// w + bias (q8_0: q ^ 0x80, bias 128; q4_0: the stored nibble, bias 8), held in
// registers for the block, x signed, and the sum starts at -bias times the block's sum
// of x (QuantizedRows::block_sums), so it ends at exactly sum w_i x_i (at most
// 32 x 255 x 127 before the correction). The float part (convert, fma by d_w * d_x) is
// the portable path's, so the levels agree bitwise.
#include "kernels/cpu/quantized_matmul_vnni.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "glog/logging.h"

#if defined(__x86_64__)
// GCC 12's avx512fintrin.h initializes _mm512_undefined_ps() from itself, which
// -Wmaybe-uninitialized reports wherever a convert is inlined (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#define TANDEM_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace tandem {
namespace cpu {
namespace quantized_internal {
namespace {

// The 8 groups of block b of tile t as unsigned bytes w + bias (q8_0: q ^ 0x80, bias
// 128; q4_0: the stored nibbles, bias 8), 16 columns x 4 values.
template <DType kFormat>
TANDEM_VNNI inline void LoadUnsignedGroups(const QuantizedTiles& w, int t, int b,
                                           __m512i (&groups)[8]) {
  const uint8_t* line0 = w.Line(t, b, 0);
  const size_t stride = w.LineStride();
  if constexpr (kFormat == DType::kQ8_0) {
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) {
      groups[u] = _mm512_xor_si512(_mm512_loadu_si512(line0 + stride * u), _mm512_set1_epi8(-128));
    }
  } else {
    const __m512i low = _mm512_set1_epi8(15);
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m512i bytes = _mm512_loadu_si512(line0 + stride * u);
      groups[u] = _mm512_and_si512(bytes, low);
      groups[u + 4] = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low);
    }
  }
}

// Rows [row0, row0 + RB) (RB <= 8: 8 accumulators, 8 weight groups and the sums fit the
// 32 registers) against the 16 columns of tile t: per block, the weight groups once for
// all RB rows; per row the block sums (8 vpdpbusd in two chains from the block's start),
// a convert and an FMA; stored for the tile's columns in [lo, hi).
template <int RB, DType kFormat>
TANDEM_VNNI void Tile(const QuantizedRows& x, int row0, const QuantizedTiles& w, int t, int lo,
                      int hi, float* out) {
  constexpr int kBias = kFormat == DType::kQ8_0 ? 128 : 8;
  __m512 acc[RB];
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) acc[r] = _mm512_setzero_ps();
  for (int b = 0; b < x.blocks_per_row; ++b) {
    __m512i groups[8];
    LoadUnsignedGroups<kFormat>(w, t, b, groups);
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.BlockScales(t, b))));
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
      const int8_t* xq = x.RowQuants(row0 + r) + size_t(b) * kQ8BlockSize;
      __m512i even = _mm512_set1_epi32(-kBias * x.RowBlockSums(row0 + r)[b]);
      __m512i odd = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int u = 0; u < 8; u += 2) {
        int32_t g0, g1;
        std::memcpy(&g0, xq + 4 * u, 4);
        std::memcpy(&g1, xq + 4 * u + 4, 4);
        even = _mm512_dpbusd_epi32(even, groups[u], _mm512_set1_epi32(g0));
        odd = _mm512_dpbusd_epi32(odd, groups[u + 1], _mm512_set1_epi32(g1));
      }
      const __m512 sums = _mm512_cvtepi32_ps(_mm512_add_epi32(even, odd));
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(x.RowScales(row0 + r)[b]));
      acc[r] = _mm512_fmadd_ps(sums, d, acc[r]);
    }
  }
  const int first = t * kTileColumns;
  const int begin = std::max(lo, first) - first, end = std::min(hi, first + kTileColumns) - first;
  const __mmask16 mask = static_cast<__mmask16>(((1u << end) - 1) & ~((1u << begin) - 1));
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
    _mm512_mask_storeu_ps(out + size_t(row0 + r) * w.out_dim + first, mask, acc[r]);
  }
}

// Rows [row0, row0 + rows) of tile t, rows in 1..kMaxPassRows, in one pass over its
// weights.
constexpr int kMaxPassRows = 8;

template <DType kFormat>
TANDEM_VNNI void TileRows(int rows, const QuantizedRows& x, int row0, const QuantizedTiles& w,
                          int t, int lo, int hi, float* out) {
  switch (rows) {
    case 1:
      return Tile<1, kFormat>(x, row0, w, t, lo, hi, out);
    case 2:
      return Tile<2, kFormat>(x, row0, w, t, lo, hi, out);
    case 3:
      return Tile<3, kFormat>(x, row0, w, t, lo, hi, out);
    case 4:
      return Tile<4, kFormat>(x, row0, w, t, lo, hi, out);
    case 5:
      return Tile<5, kFormat>(x, row0, w, t, lo, hi, out);
    case 6:
      return Tile<6, kFormat>(x, row0, w, t, lo, hi, out);
    case 7:
      return Tile<7, kFormat>(x, row0, w, t, lo, hi, out);
    default:
      return Tile<8, kFormat>(x, row0, w, t, lo, hi, out);
  }
}

// Every tile meeting [col_begin, col_end), for all rows in passes of up to kMaxPassRows:
// verification's few rows stream the weights once, overlapped with the arithmetic; a
// prefill's later passes read the tile from cache.
template <DType kFormat>
TANDEM_VNNI void Range(const QuantizedRows& x, const QuantizedTiles& w, int col_begin, int col_end,
                       float* out) {
  for (int t = col_begin / kTileColumns; t * kTileColumns < col_end; ++t) {
    for (int r = 0; r < x.rows; r += kMaxPassRows) {
      TileRows<kFormat>(std::min(kMaxPassRows, x.rows - r), x, r, w, t, col_begin, col_end, out);
    }
  }
}

}  // namespace

void RangeVnni(const QuantizedRows& x, const QuantizedTiles& w, int col_begin, int col_end,
               float* out) {
  CHECK_EQ(x.block_sums.size(), x.quants.size() / kQ8BlockSize)
      << "RangeVnni: activations not quantized at the avx512vnni level";
  if (w.dtype == DType::kQ4_0) return Range<DType::kQ4_0>(x, w, col_begin, col_end, out);
  Range<DType::kQ8_0>(x, w, col_begin, col_end, out);
}

}  // namespace quantized_internal
}  // namespace cpu
}  // namespace tandem

#endif  // defined(__x86_64__)
