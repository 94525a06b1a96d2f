// Host-side weights of one tensor-parallel rank of a Llama-family model, as loaded
// from a Hugging Face checkpoint. Shapes follow PyTorch nn.Linear: [out, in].
//
// Tensor parallel (Megatron style) for rank r of n:
//  * q/k/v/gate/up are column-parallel: rank r holds output rows of its heads
//    (num_heads/n query heads, num_kv_heads/n KV heads, intermediate_size/n MLP rows).
//    When n > num_kv_heads (n a multiple of it) the KV heads are replicated instead:
//    rank r holds the single KV head its query heads read, r / (n / num_kv_heads).
//  * o/down are row-parallel: rank r holds the input columns matching its heads/rows;
//    their outputs are partial sums that the model all-reduces.
//  * lm_head is vocab-parallel: rank r holds rows [r*V/n, (r+1)*V/n).
//  * Embeddings and norms are replicated.
#ifndef TANDEM_MODEL_WEIGHTS_H_
#define TANDEM_MODEL_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace tandem {

// A row-major host tensor [rows, cols] of `dtype` (1-D tensors have rows = 1). Either
// a view into a mapped checkpoint file (zero copy) or an owned copy (slices that are
// not contiguous, e.g. row-parallel columns). `owner` keeps the memory alive (for
// kQ8_0/kQ4_0 both the quants in `data` and the f16 `scales`).
struct HostTensor {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  std::shared_ptr<const void> owner;
  const void* scales = nullptr;  // kQ8_0/kQ4_0 only: f16 [rows, Q8BlocksPerRow(cols)].

  int64_t numel() const { return rows * cols; }
  // Element (i, j) converted to float (for tests and tools; not a hot path).
  float At(int64_t i, int64_t j) const;
};

struct LayerWeights {
  HostTensor input_norm;      // [1, hidden]
  HostTensor q_proj;          // [num_heads/n * head_dim, hidden]
  HostTensor k_proj;          // [LocalKvHeads * head_dim, hidden]
  HostTensor v_proj;          // [LocalKvHeads * head_dim, hidden]
  HostTensor o_proj;          // [hidden, num_heads/n * head_dim]
  HostTensor post_attn_norm;  // [1, hidden]
  HostTensor gate_proj;       // [intermediate/n, hidden]
  HostTensor up_proj;         // [intermediate/n, hidden]
  HostTensor down_proj;       // [hidden, intermediate/n]
};

struct LlamaWeights {
  LlamaConfig config;
  int tp_rank = 0;
  int tp_size = 1;
  HostTensor embed_tokens;  // [vocab, hidden], replicated
  std::vector<LayerWeights> layers;
  HostTensor final_norm;    // [1, hidden]
  HostTensor lm_head;       // [vocab/n, hidden]: this rank's vocab slice (a view of
                            // embed_tokens rows when tie_word_embeddings)
  int64_t vocab_begin = 0;  // First vocab id of this rank's lm_head slice.
};

// KV heads held by each of `tp_size` ranks: num_kv_heads / tp_size, or 1 when the
// KV heads are replicated (tp_size > num_kv_heads).
int LocalKvHeads(const LlamaConfig& config, int tp_size);
// Global index of the first KV head rank `tp_rank` holds.
int FirstKvHead(const LlamaConfig& config, int tp_rank, int tp_size);

// Loads rank `tp_rank` of `tp_size` from a Hugging Face model directory (config.json
// plus model.safetensors, or model.safetensors.index.json with its shards), reading
// only this rank's slices. Tensors keep their stored dtype (f32, f16 or bf16), or are
// block-quantized matrices told by their dtype: q8_0, an I8 tensor "<name>" of the
// matrix shape, or q4_0, a U8 tensor "<name>" [rows, Q4BytesPerRow(cols)] of packed
// nibbles, each plus an F16 tensor "<name>_scale" [rows, Q8BlocksPerRow(cols)]
// (docs/architecture.md "Weight formats").
// Errors (INVALID_ARGUMENT / NOT_FOUND) name the file and tensor: missing or
// truncated files, bad headers, missing tensors, wrong shapes or dtypes, missing or
// misshapen q8_0/q4_0 scales (e.g. another block size), block-format row-parallel
// slices that do not cut on blocks, and shapes not divisible by tp_size.
absl::StatusOr<LlamaWeights> LoadLlamaWeights(const std::string& model_dir, int tp_rank,
                                              int tp_size);

// The whole tensor `view` as a HostTensor (a view of the mapping when aligned, else an
// owned copy), checked to be F32, F16 or BF16 of exactly `shape` (1-D: rows = 1).
// INVALID_ARGUMENT "<where>: ..." otherwise. For tensors outside a Llama checkpoint
// (model/medusa_heads.h).
absl::StatusOr<HostTensor> WholeTensor(SafetensorsTensorView view, const std::string& where,
                                       const std::vector<int64_t>& shape);

}  // namespace tandem

#endif  // TANDEM_MODEL_WEIGHTS_H_
