// Scaled dot-product attention over a paged KV cache (the Backend::Attention contract).
#ifndef TANDEM_KERNELS_CPU_ATTENTION_H_
#define TANDEM_KERNELS_CPU_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace tandem {
namespace cpu {

// The keys each query row of a StepPlan attends to, in ascending logical order: every
// key of [0, prefix_keys[r]) followed by extra_keys[extra_begin[r], extra_begin[r + 1])
// (ascending, all >= prefix_keys[r]). A chain row r (i-th of its sequence) sees the
// prefix context_length + i + 1; a tree row sees the prefix context_length plus its
// ancestors and itself.
struct AttentionRows {
  std::vector<int32_t> sequence;     // [rows] index into plan.sequences.
  std::vector<int32_t> prefix_keys;  // [rows]
  std::vector<int32_t> extra_begin;  // [rows + 1]
  std::vector<int32_t> extra_keys;
  int max_keys = 0;        // Most keys any row sees.
  int64_t total_keys = 0;  // Sum over rows.
};

// `plan` must satisfy ValidateStepPlan.
AttentionRows BuildAttentionRows(const StepPlan& plan);

// out[r, h*head_dim + d] = sum_j softmax_j(scale * q[r, h] . k_j) v_j[d] over the keys j
// of row r (logical order), read from KV head h / (num_heads / layout.num_kv_heads).
// q, out: [rows, num_heads * head_dim]; caches per `layout`. Scores are dot products
// with 8 interleaved partial sums and the fixed tree of vec_math.h, softmax is two-pass
// (max, then exp and an 8-lane sum), and the value sum runs over keys in logical order
// (the AVX2 path as two interleaved chains, even and odd keys, added at the end), so
// each output depends only on its own row's query and keys (batch invariant).
// Caches of layout.dtype kF32, kF16 or kBF16: 16-bit keys and values are widened
// exactly to float32 as they are read, so the result is bitwise that of float32 caches
// holding the widened values. Requires num_heads % num_kv_heads == 0 and block ids <
// layout.num_blocks (checked).
void PagedAttention(SimdLevel level, ThreadPool* pool, const StepPlan& plan,
                    const AttentionRows& rows, const float* q, const KvLayout& layout,
                    const void* k_cache, const void* v_cache, int num_heads, float scale,
                    float* out);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_ATTENTION_H_
