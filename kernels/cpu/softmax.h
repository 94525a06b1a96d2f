// Numerically stable softmax over the rows of a matrix.
#ifndef TANDEM_KERNELS_CPU_SOFTMAX_H_
#define TANDEM_KERNELS_CPU_SOFTMAX_H_

#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace tandem {
namespace cpu {

// out[r, i] = exp(x[r, i] - max_r) / sum_i exp(x[r, i] - max_r). x, out: [rows, cols] (may
// alias). -inf entries give 0; a row of all -inf gives NaN. The sum uses 8 interleaved
// partial sums and the fixed tree of vec_math.h (batch invariant).
void Softmax(SimdLevel level, ThreadPool* pool, const float* x, int rows, int cols, float* out);

// The single-row form used by other kernels; `n` >= 1.
void SoftmaxRow(SimdLevel level, const float* x, int n, float* out);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_SOFTMAX_H_
