// Element-wise ops of the MLP and residual stream.
#ifndef TANDEM_KERNELS_CPU_ELEMENTWISE_H_
#define TANDEM_KERNELS_CPU_ELEMENTWISE_H_

#include <cstddef>

#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace tandem {
namespace cpu {

// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i], i < n. Each
// element's value is independent of n and of where the element falls in a vector.
// `out` may alias `gate` or `up`.
void SiluMul(SimdLevel level, ThreadPool* pool, const float* gate, const float* up, size_t n,
             float* out);

// x[i] += y[i], i < n.
void Add(ThreadPool* pool, float* x, const float* y, size_t n);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_ELEMENTWISE_H_
