// Paged attention on the GPU for decode (1 query per sequence), verify (K+1 queries,
// causal within the chunk) and tree verification (ancestor masks), following the
// Backend::Attention contract in kernels/backend.h.
//
// The CUDA kernel tests check it against the double-precision reference when a device exists.
#ifndef TANDEM_KERNELS_CUDA_ATTENTION_KERNELS_H_
#define TANDEM_KERNELS_CUDA_ATTENTION_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::cuda {

// Keys are processed in chunks of this many visible keys (a constant: a row's chunk
// boundaries depend only on its own key count, never on the batch).
constexpr int kAttentionChunkKeys = 64;
// Largest supported head_dim.
constexpr int kAttentionMaxHeadDim = 256;

// Element type of a KV cache: float32, or 16-bit values widened exactly on load
// (cpu::F16ToFloat / cpu::Bf16ToFloat), so the math is the float32 attention's.
enum class KvElement : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

// Everything one attention call needs; all pointers are device memory.
//
// Row r sees, in ascending logical order, the keys [0, row_prefix[r]) followed by
// extra_keys[row_extra_begin[r] .. row_extra_begin[r + 1]) (tree ancestors). Logical
// key L of row r lives in slot block_tables[row_table_offset[r] + L / block_size] *
// block_size + L % block_size of the caches. The visible keys of row r are split into
// chunks numbered row_chunk_begin[r] .. row_chunk_begin[r + 1] (ceil(keys / 64) of
// them); chunk_row maps a chunk number back to its row.
struct AttentionParams {
  const float* q = nullptr;       // [rows, num_heads * head_dim]
  const void* k_cache = nullptr;  // [slots, num_kv_heads, head_dim] of kv_element
  const void* v_cache = nullptr;  // same layout
  KvElement kv_element = KvElement::kF32;
  float* out = nullptr;  // [rows, num_heads * head_dim]
  int rows = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;
  int block_size = 0;
  const int32_t* block_tables = nullptr;
  const int32_t* row_table_offset = nullptr;  // [rows]
  const int32_t* row_prefix = nullptr;        // [rows]
  const int32_t* row_extra_begin = nullptr;   // [rows + 1]
  const int32_t* extra_keys = nullptr;        // may be null when there are none
  const int32_t* row_chunk_begin = nullptr;   // [rows + 1]
  const int32_t* chunk_row = nullptr;         // [total_chunks]
  int total_chunks = 0;
  // Scratch of at least total_chunks * num_heads * head_dim floats and
  // total_chunks * num_heads * 2 floats.
  float* partial_acc = nullptr;
  float* partial_max_sum = nullptr;
};

// Floats of scratch AttentionParams needs: {partial_acc, partial_max_sum}.
inline int64_t AttentionScratchAccFloats(int total_chunks, int num_heads, int head_dim) {
  return int64_t(total_chunks) * num_heads * head_dim;
}
inline int64_t AttentionScratchMaxSumFloats(int total_chunks, int num_heads) {
  return int64_t(total_chunks) * num_heads * 2;
}

// out = softmax(scale * q k^T) v per row and query head h (KV head h / (num_heads /
// num_kv_heads)). Two kernels: per (chunk, KV head) a block computes the chunk's
// running max m, sum l and unnormalised value sum of up to 2 query heads sharing the
// KV head; then per (row, head) the chunks are combined in chunk order:
//   out = sum_c e^(m_c - M) acc_c / sum_c e^(m_c - M) l_c,  M = max_c m_c.
// Every reduction has a fixed order (dot products: lane-strided sequential FMAs then a
// warp butterfly; values: keys in ascending order), so a row's output depends only
// on its own query and keys (batch invariant).
// Returns cudaErrorInvalidValue for inconsistent sizes (head_dim outside
// [1, kAttentionMaxHeadDim], num_heads not a multiple of num_kv_heads, null
// pointers), else the launch error.
cudaError_t LaunchPagedAttention(const AttentionParams& params, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_ATTENTION_KERNELS_H_
