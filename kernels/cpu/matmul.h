// Matrix product with a row-major weight: out[r, o] = sum_k x[r, k] * w[o, k], for
// float32 weights and for weights kept in their stored format: bf16 and f16 widened to
// float32 in registers, q8_0 and q4_0 by int8 block dot products.
#ifndef TANDEM_KERNELS_CPU_MATMUL_H_
#define TANDEM_KERNELS_CPU_MATMUL_H_

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace tandem {
namespace cpu {

// A weight matrix [out_dim, in_dim] in one of the formats of kernels/backend.h's DType:
// `data` holds float32, bf16 or f16 elements (row-major), or for kQ8_0 and kQ4_0 the
// tiled layout of kernels/cpu/quantized_tiles.h (quants and scales, made from the file
// layout by PackQuantizedTiles). Element (o, k) in float32 is the exact
// widening of the stored value, for the block formats the float32 product
// float(quant) * float(scale of the block). Not owning.
struct WeightMatrix {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int out_dim = 0;
  int in_dim = 0;
};

// x: [rows, in_dim] float32, out: [rows, out_dim] float32; row-major, no alignment
// required, `out` must not overlap the inputs. Work is split over output columns across
// `pool` (nullptr = calling thread only).
//
// Batch invariant: every out[r, o] is accumulated in the same order whatever `rows`, the
// thread count and the other rows. f32, bf16 and f16: 8 interleaved partial sums over k
// (lane j takes k = j mod 8; in_dim tails read as zero), then the fixed tree of
// vec_math.h, over the float32 value of each weight element (see WeightMatrix), so a
// 16-bit weight gives bitwise the result of the float32 MatMul on its widened copy; the
// AVX2 path uses fused multiply-adds, the portable path separate ones, so the two differ
// in the last bits. q8_0 and q4_0: the integer kernel of kernels/cpu/quantized_matmul.h
// (each row of x quantized to int8 per 32-value block, exact integer block dot products,
// float32 accumulation in a fixed order); every SIMD level agrees bitwise, and
// the result is within sum_k |w[o, k]| * max|x in k's block| / 254 (+ float32 rounding)
// of the float32 MatMul on the dequantized weights.
void MatMul(SimdLevel level, ThreadPool* pool, const float* x, int rows, const WeightMatrix& w,
            float* out);

// The float32 MatMul: w is [out_dim, in_dim] float32.
void MatMul(SimdLevel level, ThreadPool* pool, const float* x, int rows, const float* w,
            int out_dim, int in_dim, float* out);

// Writes row `row` of `w` as float32 (in_dim values) to `out` (the widening above).
void WidenRow(const WeightMatrix& w, int row, float* out);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_MATMUL_H_
