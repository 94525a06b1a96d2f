// Root-mean-square layer norm.
#ifndef TANDEM_KERNELS_CPU_RMSNORM_H_
#define TANDEM_KERNELS_CPU_RMSNORM_H_

#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace tandem {
namespace cpu {

// out[r, i] = weight[i] * (x[r, i] * inv_rms(r)), inv_rms(r) = 1 / sqrt(mean_i(x[r, i]^2)
// + eps). x, out: [rows, dim] (may be the same array); weight: [dim]. The sum of squares
// uses 8 interleaved partial sums and the fixed tree of vec_math.h (batch invariant).
void RmsNorm(SimdLevel level, ThreadPool* pool, const float* x, const float* weight, int rows,
             int dim, float eps, float* out);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_RMSNORM_H_
