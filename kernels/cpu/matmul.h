// Matrix product with a row-major weight: out[r, o] = sum_k x[r, k] * w[o, k].
#ifndef TANDEM_KERNELS_CPU_MATMUL_H_
#define TANDEM_KERNELS_CPU_MATMUL_H_

#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace tandem {
namespace cpu {

// x: [rows, in_dim], w: [out_dim, in_dim], out: [rows, out_dim]; all float32, row-major,
// no alignment required, `out` must not overlap the inputs. Work is split over output
// columns across `pool` (nullptr = calling thread only).
//
// Batch invariant: every out[r, o] is accumulated in the same order whatever `rows`, the
// thread count and the other rows: 8 interleaved partial sums over k (lane j takes
// k = j mod 8; in_dim tails read as zero), then the fixed tree of vec_math.h. The AVX2
// path uses fused multiply-adds, the portable path separate ones, so the two differ in
// the last bits.
void MatMul(SimdLevel level, ThreadPool* pool, const float* x, int rows, const float* w,
            int out_dim, int in_dim, float* out);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_MATMUL_H_
