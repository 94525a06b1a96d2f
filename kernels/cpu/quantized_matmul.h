// Integer matrix product for block-quantized weights (q8_0, q4_0): the activation rows are
// quantized to int8 per block of kQ8BlockSize values, each block's dot product is exact
// int8 x int8 integer math, and the block sums are scaled by d_weight * d_activation and
// accumulated in float32. kernels/cpu/matmul.h's MatMul calls it for q8_0 and q4_0.
#ifndef TANDEM_KERNELS_CPU_QUANTIZED_MATMUL_H_
#define TANDEM_KERNELS_CPU_QUANTIZED_MATMUL_H_

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/quantized_tiles.h"
#include "kernels/cpu/simd.h"

namespace tandem {
namespace cpu {

// Activation rows [rows, cols] quantized per block of kQ8BlockSize values: a block with
// max |x| = m has the float32 scale d = m / 127 and quants q = round(x * (1 / d)) (round
// to nearest, ties to even; all zero when m = 0), so x ~ q * d with |q| <= 127. A block
// holding a NaN or an infinity gets d = NaN and zero quants (the outputs it reaches are
// NaN); one with m below about 1e-36 (1 / d would overflow) counts as zero (d = 0).
// Every row is padded with zero quants to a whole number of blocks. At SimdLevel
// kAvx512Vnni each block also has the sum of its quants (the correction of a vpdpbusd
// product with weights biased to unsigned bytes).
struct QuantizedRows {
  int rows = 0;
  int cols = 0;
  int blocks_per_row = 0;
  std::vector<int8_t> quants;       // [rows, blocks_per_row * kQ8BlockSize]
  std::vector<float> scales;        // [rows, blocks_per_row]
  std::vector<int32_t> block_sums;  // kAvx512Vnni: [rows, blocks_per_row]; else empty.
  const int8_t* RowQuants(int r) const {
    return quants.data() + size_t(r) * blocks_per_row * kQ8BlockSize;
  }
  const float* RowScales(int r) const { return scales.data() + size_t(r) * blocks_per_row; }
  const int32_t* RowBlockSums(int r) const {
    return block_sums.data() + size_t(r) * blocks_per_row;
  }
};

// Quantizes x [rows, cols] (float32, row-major) into `out` (its vectors are reused). Every
// level gives bitwise the same quants and scales (kAvx512Vnni uses the AVX2 code), and a
// row's result depends on that row only.
void QuantizeRows(SimdLevel level, const float* x, int rows, int cols, QuantizedRows* out);

// out[r, o] for every row r of x and the output columns o in [col_begin, col_end) of the
// q8_0 or q4_0 weight `w` in the tiled layout of kernels/cpu/quantized_tiles.h (w.in_dim
// == x.cols; q4_0 nibbles unpacked to int8 in [-8, 7]). `out` is [x.rows, w.out_dim]
// row-major; other columns are not written. Not owning. Fastest with col_begin a
// multiple of kTileColumns (a call computes whole tiles).
//
// Per output element: for each block b in order, the exact int32 dot product s_b of the
// weight and activation quants (32 values) is accumulated as acc = fma(float(s_b),
// d_w(b) * d_x(b), acc) from acc = 0; the output is acc. The order does not depend on
// the row count, the column range or the SIMD level, so results are batch invariant and
// the portable, AVX2 and AVX-512 VNNI levels agree bitwise (VNNI: vpdpbusd of the
// weights plus a bias as unsigned bytes with x, the sum started at -bias * the block's
// sum of x: the same int32 sums), as does the CUDA kernel
// (kernels/cuda/quantized_gemm_kernels.h). `x` must come from QuantizeRows at `level`.
void QuantizedMatMulRange(SimdLevel level, const QuantizedRows& x, const QuantizedTiles& w,
                          int col_begin, int col_end, float* out);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_QUANTIZED_MATMUL_H_
