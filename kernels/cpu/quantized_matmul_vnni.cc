// The AVX-512 VNNI path of the integer q8_0/q4_0 matmul: vpdpbusd on 256-bit registers
// (AVX-512VL), compiled with target attributes only, so the rest of the build and the
// binaries need no more than AVX2 (quantized_matmul.cc calls this file's functions at
// SimdLevel::kAvx512Vnni only).
//
// vpdpbusd multiplies unsigned bytes by signed bytes and adds each group of 4 products
// to a 32-bit lane: the weights go in as unsigned w + kBias (q8_0: q ^ 0x80; q4_0: the
// stored nibble), and each (row, block) starts its lanes at -kBias * (lane sum of x), so
// lane j ends at exactly sum_{i=4j..4j+3} w_i * x_i: the int32 partial sums of the AVX2
// path (maddubs + madd). The float part (convert, d_w * d_x, FMA into lane j, the fixed
// tree) is the AVX2 path's, so the two agree bitwise.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quantized_blocks.h"
#include "kernels/cpu/quantized_matmul.h"
#include "kernels/cpu/vec_math.h"

#if defined(TANDEM_HAVE_AVX2_KERNELS)

#define TANDEM_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace tandem {
namespace cpu {
namespace quantized_internal {
namespace {

// The scale products d_w(col + c, b) * d_x(row0 + r, b) of the n <= 8 blocks
// [b0, b0 + n) as table[r][c][b - b0]: one multiply per (row, column) for 8 blocks (the
// float32 product of the AVX2 path, computed 8 lanes at a time; lanes past n are 0).
template <int RB, int CB, typename Blocks>
TANDEM_VNNI inline void ScaleProducts(const QuantizedRows& x, int row0, const Blocks& w, int col,
                                      int b0, int n, float (&table)[RB][CB][8]) {
  const __mmask8 mask = static_cast<__mmask8>((1u << n) - 1);
  __m256 dw[CB];
#pragma GCC unroll 8
  for (int c = 0; c < CB; ++c) {
    const uint16_t* scales = w.scales + (size_t(col) + c) * w.blocks_per_row + b0;
    dw[c] = _mm256_cvtph_ps(_mm_maskz_loadu_epi16(mask, scales));
  }
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
    const __m256 dx = _mm256_maskz_loadu_ps(mask, x.RowScales(row0 + r) + b0);
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) _mm256_store_ps(table[r][c], _mm256_mul_ps(dw[c], dx));
  }
}

// Adds block b of rows [row0, row0 + RB) times the unsigned weight blocks wu of CB
// columns, with the scale products d[r][c][j]. Per row: the lanes' start -kBias * sum(x)
// (one vpdpbusd with the bias bytes and -x); per (row, column): one vpdpbusd, a convert
// and an FMA whose scale operand is a broadcast load from the table.
template <int RB, int CB, int kBias>
TANDEM_VNNI inline void AccumulateBlock(const QuantizedRows& x, int row0, int b,
                                        const __m256i (&wu)[CB], const float (&d)[RB][CB][8], int j,
                                        __m256 (&acc)[RB][CB]) {
  const __m256i bias = _mm256_set1_epi8(kBias), zero = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
    const __m256i xv = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(x.RowQuants(row0 + r) + size_t(b) * kBlock));
    const __m256i start = _mm256_dpbusd_epi32(zero, bias, _mm256_sub_epi8(zero, xv));
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) {
      const __m256 partial = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(start, wu[c], xv));
      acc[r][c] = _mm256_fmadd_ps(partial, _mm256_set1_ps(d[r][c][j]), acc[r][c]);
    }
  }
}

// The CB unsigned weight blocks b of columns [col, col + CB); a row's short last block
// from a zero-padded copy (padding 0 + kBias meets x's zero padding).
template <int CB, typename Blocks>
TANDEM_VNNI inline void LoadWeights(const Blocks& w, int col, int b, __m256i (&wu)[CB]) {
  if (b < w.full_blocks) {
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) wu[c] = w.LoadUnsigned(size_t(col) + c, b);
    return;
  }
  alignas(32) int8_t tail[kBlock];
  for (int c = 0; c < CB; ++c) {
    w.CopyBlock(size_t(col) + c, b, tail);
    wu[c] = _mm256_add_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(tail)),
                            _mm256_set1_epi8(static_cast<char>(Blocks::kBias)));
  }
}

// Rows [row0, row0 + RB) against columns [col, col + CB): blocks in order, in groups of 8
// sharing one table of scale products (block j of a group also asks for column j of the
// next tile's group); then the fixed reduction.
template <int RB, int CB, typename Blocks>
TANDEM_VNNI inline void Tile(const QuantizedRows& x, int row0, const Blocks& w, int col, float* out,
                             int out_dim) {
  __m256 acc[RB][CB];
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  alignas(32) float d[RB][CB][8];
  __m256i wu[CB];
  for (int b0 = 0; b0 < x.blocks_per_row; b0 += 8) {
    const int n = std::min(8, x.blocks_per_row - b0);
    ScaleProducts(x, row0, w, col, b0, n, d);
#pragma GCC unroll 1
    for (int j = 0; j < n; ++j) {
      if (j < CB) PrefetchNextTileColumn<CB>(w, col, out_dim, b0, j);
      LoadWeights(w, col, b0 + j, wu);
      AccumulateBlock<RB, CB, Blocks::kBias>(x, row0, b0 + j, wu, d, j, acc);
    }
  }
  StoreTile(acc, out + size_t(row0) * out_dim + col, out_dim);
}

// Tile<RB, cb> for a runtime cb in 1..CB.
template <int RB, int CB, typename Blocks>
TANDEM_VNNI void TileUpTo(int cb, const QuantizedRows& x, int row0, const Blocks& w, int col,
                          float* out, int out_dim) {
  if constexpr (CB > 1) {
    if (cb < CB) return TileUpTo<RB, CB - 1>(cb, x, row0, w, col, out, out_dim);
  }
  Tile<RB, CB>(x, row0, w, col, out, out_dim);
}

template <int RB, int CB, typename Blocks>
TANDEM_VNNI void Sweep(const QuantizedRows& x, int row0, const Blocks& w, int col_begin,
                       int col_end, float* out, int out_dim) {
  int c = col_begin;
  for (; c + CB <= col_end; c += CB) Tile<RB, CB>(x, row0, w, c, out, out_dim);
  if (c < col_end) TileUpTo<RB, CB>(col_end - c, x, row0, w, c, out, out_dim);
}

// Rows [row0, row0 + rb) for rb in 1..kMaxTileRows, each with the tile width that keeps
// rb * width accumulators, the width's weight vectors and one row's x and start in the 32
// registers of AVX-512VL.
constexpr int kMaxTileRows = 6;

template <typename Blocks>
TANDEM_VNNI void SweepRows(int rb, const QuantizedRows& x, int row0, const Blocks& w, int col_begin,
                           int col_end, float* out, int out_dim) {
  switch (rb) {
    case 1:
      return Sweep<1, 8>(x, row0, w, col_begin, col_end, out, out_dim);
    case 2:
      return Sweep<2, 8>(x, row0, w, col_begin, col_end, out, out_dim);
    case 3:
      return Sweep<3, 6>(x, row0, w, col_begin, col_end, out, out_dim);
    case 4:
      return Sweep<4, 5>(x, row0, w, col_begin, col_end, out, out_dim);
    case 5:
      return Sweep<5, 4>(x, row0, w, col_begin, col_end, out, out_dim);
    default:
      return Sweep<6, 4>(x, row0, w, col_begin, col_end, out, out_dim);
  }
}

template <typename Blocks>
void Range(const QuantizedRows& x, const Blocks& w, int out_dim, int col_begin, int col_end,
           float* out) {
  ForEachRowBlock(
      x.rows, x.cols, kMaxTileRows, col_begin, col_end,
      [&](int rb, int row0, int c0, int c1) { SweepRows(rb, x, row0, w, c0, c1, out, out_dim); });
}

}  // namespace

void RangeVnni(const QuantizedRows& x, const Q8Blocks& w, int out_dim, int col_begin, int col_end,
               float* out) {
  Range(x, w, out_dim, col_begin, col_end, out);
}

void RangeVnni(const QuantizedRows& x, const Q4Blocks& w, int out_dim, int col_begin, int col_end,
               float* out) {
  Range(x, w, out_dim, col_begin, col_end, out);
}

}  // namespace quantized_internal
}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_HAVE_AVX2_KERNELS
