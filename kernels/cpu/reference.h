// Naive double-precision implementations of the backend ops, written for clarity and
// independent of the optimised kernels: the oracle the CPU kernels (and through them
// the CUDA kernels) are tested against. Shapes and semantics follow kernels/backend.h.
#ifndef TANDEM_KERNELS_CPU_REFERENCE_H_
#define TANDEM_KERNELS_CPU_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace tandem {
namespace reference {

// out[r, o] = sum_k x[r, k] * w[o, k].
void MatMul(const float* x, int rows, const float* w, int out_dim, int in_dim, float* out);

// out[r, i] = weight[i] * x[r, i] / sqrt(mean(x[r, :]^2) + eps).
void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, float* out);

// Rotate-half RoPE in place; x: [rows, num_heads * head_dim].
void Rope(const std::vector<int32_t>& positions, float* x, int num_heads, int head_dim,
          const float* inv_freq);

// The logical key indices row `row_in_sequence` of `seq` attends to, ascending.
std::vector<int> VisibleKeys(const StepPlan::Sequence& seq, int row_in_sequence);

// Attention over the paged caches of `plan` (keys looked up through block tables).
void Attention(const StepPlan& plan, const float* q, const KvLayout& layout, const float* k_cache,
               const float* v_cache, int num_heads, float scale, float* out);

// Row-wise softmax; x, out: [rows, cols].
void Softmax(const float* x, int rows, int cols, float* out);

// out[i] = gate[i] * sigmoid(gate[i]) * up[i].
void SiluMul(const float* gate, const float* up, size_t n, float* out);

}  // namespace reference
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_REFERENCE_H_
