// Llama-family decoder forward pass over ragged batches with a paged KV cache,
// tensor parallel over a Communicator, written once against kernels/backend.h.
//
// Math (Hugging Face Llama): per layer
//   h = x + o_proj(attention(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))),
//       n1 = rmsnorm(x)
//   x = h + down_proj(silu(gate_proj(n2)) * up_proj(n2)),  n2 = rmsnorm(h)
// then logits = lm_head(rmsnorm(x)).
// Tensor parallel: o_proj and down_proj outputs are all-reduced (two collectives per
// layer); the vocab-parallel lm_head slices are all-gathered (one per forward). Every
// rank must call Forward/Truncate/Release/KeepPath with the same batches in the same
// order (the consumers may differ: only the leader of a group consumes outputs).
//
// Batch invariance: the logits of a sequence are bitwise identical whether it is run
// alone, as a multi-token chunk, or inside a batch with other sequences, because every
// op is row-wise or reduces in a fixed order (see kernels/backend.h), and the
// collectives are deterministic.
//
// Not thread-safe: the owner serializes calls.
#ifndef TANDEM_MODEL_LLAMA_H_
#define TANDEM_MODEL_LLAMA_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/forward_consumer.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace tandem {

// Uploads `t` to `backend` in its stored format (UploadWeight, or UploadQ8Weight /
// UploadQ4Weight with its scales for the block formats); the backend's errors.
absl::StatusOr<Weight> UploadHostTensor(Backend* backend, const HostTensor& t);

struct LlamaModelOptions {
  // KV cache memory of this rank in bytes (K and V of all layers); rounded down to
  // whole blocks of KvBytesPerBlock(layers, block_size, local KV heads, head_dim,
  // DTypeSize(kv_dtype)).
  size_t kv_cache_bytes = size_t(64) << 20;
  // Element type of the KV cache: kF32, or kF16/kBF16 (half the memory; keys and values
  // rounded to nearest even when written, attention math in float32) where the backend
  // supports it (Backend::SupportsKvDType; Create fails otherwise).
  DType kv_dtype = DType::kF32;
  int block_size = 16;          // Tokens per KV block.
  int max_batch_tokens = 1024;  // Most new tokens (rows) in one Forward.
  absl::Duration collective_timeout = absl::Seconds(60);
};

// One sequence's share of a forward pass.
struct SequenceInput {
  uint64_t seq_id = 0;
  // Position of tokens[0]. Must be <= the cached length (0 for an unknown id, which
  // is created); a smaller value first truncates the cache to it, which is how
  // rejected speculative tokens are rolled back.
  int start_position = 0;
  std::vector<int32_t> tokens;         // New tokens, at least one, each in [0, vocab).
  std::vector<int32_t> logit_indices;  // Indices into tokens whose logits are wanted,
                                       // strictly ascending.
  // Tree candidates: parent index per new token (parents[i] in [-1, i), -1 = child of
  // the cached context); the RoPE position of token i is start_position + depth(i).
  // Empty = a chain (position start_position + i). Row i's KV is cached at logical
  // index start_position + i in either case; see KeepPath.
  std::vector<int32_t> parents;
  // Explicit RoPE position per new token, each in [0, max_position_embeddings); empty
  // = derived from parents as above. Only RoPE reads them: attention masking and KV
  // slots still follow parents and start_position.
  std::vector<int32_t> positions;
};

// Logit rows a Forward of `batch` returns: the sum of its logit_indices sizes.
int CountLogitRows(const std::vector<SequenceInput>& batch);

struct KvCacheStats {
  int block_size = 0;
  int total_blocks = 0;
  int used_blocks = 0;
  int free_blocks = 0;
  int num_sequences = 0;
  size_t bytes_per_block = 0;  // This rank, all layers, K and V.
  size_t total_bytes = 0;      // bytes_per_block * total_blocks.
};

class LlamaModel {
 public:
  // Uploads `weights` (one tensor-parallel rank, see model/weights.h) through
  // `backend` and allocates the KV cache. `backend` must outlive the model; the host
  // tensors' owners are kept alive by the uploaded weights as the backend needs.
  // `comm` may be nullptr for tp = 1; otherwise its rank/size must match the
  // weights' tp_rank/tp_size. INVALID_ARGUMENT on inconsistent shapes or options;
  // RESOURCE_EXHAUSTED when the backend cannot allocate the KV cache.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(const LlamaWeights& weights,
                                                            Backend* backend, Communicator* comm,
                                                            const LlamaModelOptions& options);

  // Runs one forward pass over `batch` (distinct seq_ids) and hands its outputs (the
  // requested logit rows and, when asked, their hidden rows, in backend memory; see
  // model/forward_consumer.h) to `consumer`, which decides what reaches the host.
  // Afterwards each sequence's cached length is start_position + tokens.size().
  // Errors: INVALID_ARGUMENT for bad input (empty batch or token list, token out of
  // range, start_position past the cached length, more than max_batch_tokens tokens,
  // a position outside [0, max_position_embeddings), duplicate ids, bad parents,
  // positions or logit_indices) or when consumer.CheckRows rejects the rows;
  // RESOURCE_EXHAUSTED when the KV cache cannot hold the batch. On these errors no
  // sequence's cache changes. If the computation or the consumer fails (a collective
  // times out), each sequence of the batch is truncated to its start_position (new ids
  // are released) and the error is returned.
  absl::Status Forward(const std::vector<SequenceInput>& batch, ForwardConsumer& consumer);

  // Shrinks the cache of `seq_id` to `length` (O(1) plus freeing whole blocks).
  // NOT_FOUND / INVALID_ARGUMENT as KvCache::Truncate.
  absl::Status Truncate(uint64_t seq_id, int length);
  // Frees every block of `seq_id` no branch shares. NOT_FOUND for an unknown id.
  absl::Status Release(uint64_t seq_id);
  // Makes `child` a branch of `parent` holding its cached positions [0, length), sharing
  // its KV blocks (KvCache::Fork: no copy; a shared partial block is copied when either
  // writes into it). An existing `child` is replaced. Errors as KvCache::Fork. The
  // parent's last forward can no longer be compacted by KeepPath.
  absl::Status Fork(uint64_t parent, uint64_t child, int length);
  // Cached tokens of `seq_id`. NOT_FOUND for an unknown id.
  absl::StatusOr<int> CachedLength(uint64_t seq_id) const;

  // After a Forward of `seq_id` starting at `start_position` (its last one, with the
  // cache not changed since), keeps only the rows `accepted_rows` (indices into that
  // forward's tokens forming a root-to-node path: the first has parent -1, each next
  // one is the previous one's child) and compacts their KV to logical indices
  // start_position, start_position + 1, ..., so the cache equals the accepted chain
  // fed alone. An empty list truncates to start_position. NOT_FOUND for an unknown
  // id; FAILED_PRECONDITION when the last forward does not match; INVALID_ARGUMENT
  // when the rows are not such a path.
  absl::Status KeepPath(uint64_t seq_id, int start_position,
                        const std::vector<int32_t>& accepted_rows);

  KvCacheStats kv_stats() const;
  const LlamaConfig& config() const { return config_; }
  int tp_rank() const { return tp_rank_; }
  int tp_size() const { return tp_size_; }
  int max_batch_tokens() const { return options_.max_batch_tokens; }

 private:
  struct Layer {
    Weight input_norm, q_proj, k_proj, v_proj, o_proj;
    Weight post_attn_norm, gate_proj, up_proj, down_proj;
  };
  // The shape of the last forward of a sequence, for KeepPath.
  struct LastForward {
    int start_position = 0;
    int rows = 0;
    std::vector<int32_t> parents;  // Empty = chain.
  };

  LlamaModel(Backend* backend, Communicator* comm, const LlamaModelOptions& options, KvCache cache);
  absl::Status UploadWeights(const LlamaWeights& weights);
  absl::Status AllocateKv();
  absl::Status EnsureScratch(int rows, int logit_rows);
  absl::Status Validate(const std::vector<SequenceInput>& batch);
  void BuildPlan(const std::vector<SequenceInput>& batch);
  // Validates one sequence (batch entry `s`); adds its rows and net new blocks.
  absl::Status ValidateSequence(const SequenceInput& in, size_t s, int64_t* total_rows,
                                int64_t* net_blocks);
  // Runs the planned batch (plan_) up to the requested logits and returns them in
  // backend memory (scratch, valid until the next call): logits_local_ for tp = 1,
  // else the all-gathered rank-major buffer (parts = tp_size); the hidden rows are
  // logit_normed_.
  absl::StatusOr<ForwardOutputs> ComputeOutputs();
  // Runs the layers over the planned rows into x_.
  absl::Status RunLayers(const PreparedStep& step);
  // Everything Forward does after validation: grows the cache, plans, computes and
  // hands the outputs to `consumer`; rolls the batch back when either fails.
  absl::Status Run(const std::vector<SequenceInput>& batch, ForwardConsumer& consumer);
  absl::Status AllReduce(float* data, size_t count);
  void RollBack(const std::vector<SequenceInput>& batch, const std::vector<bool>& created);
  // Copies the K and V of every layer from each copy's src block to its dst block.
  absl::Status CopyBlocks(const std::vector<KvCache::BlockCopy>& copies);

  Backend* backend_;
  Communicator* comm_;  // nullptr when tp_size_ == 1.
  LlamaModelOptions options_;
  LlamaConfig config_;
  int tp_rank_ = 0;
  int tp_size_ = 1;
  int heads_local_ = 0;
  int kv_heads_local_ = 0;
  int intermediate_local_ = 0;
  int vocab_local_ = 0;
  std::vector<float> inv_freq_;

  Weight embed_tokens_, final_norm_, lm_head_;
  std::vector<Layer> layers_;

  KvCache cache_;
  KvLayout kv_layout_;
  std::vector<Buffer> k_cache_, v_cache_;  // One per layer.

  // Scratch in backend memory, grown to the high-water mark and then reused.
  int scratch_rows_ = 0;
  int scratch_logit_rows_ = 0;
  Buffer x_, normed_, q_, k_, v_, attn_, proj_, gate_, up_, act_;
  Buffer logit_in_, logit_normed_, logits_local_, logits_gathered_;

  // Per-call host state, reused.
  StepPlan plan_;
  std::unordered_set<uint64_t> seen_ids_;
  std::vector<int32_t> depth_;
  std::vector<bool> created_;
  std::unordered_map<uint64_t, LastForward> last_forward_;
};

}  // namespace tandem

#endif  // TANDEM_MODEL_LLAMA_H_
