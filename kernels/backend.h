// The compute backend interface: memory, weights and the math ops of a Llama-family
// forward pass. The model code (model/llama.*) is written once against this interface;
// `cpu` (kernels/cpu) is the reference implementation and `cuda` (kernels/cuda)
// implements the same contract on a GPU.
//
// Conventions for every op:
//  * Activations are row-major float32 arrays in backend memory (host memory for cpu,
//    device memory for cuda), addressed by raw pointers obtained from Buffer::f32().
//  * Weights are uploaded once (UploadWeight, UploadQ8Weight, UploadQ4Weight) and may
//    be stored in another dtype or layout (cuda keeps bf16, or q8_0/q4_0 as stored; cpu
//    keeps bf16/f16 matrices as stored and widens them in registers, and regroups
//    q8_0/q4_0 into 16-column tiles, kernels/cpu/quantized_tiles.h; both
//    multiply q8_0/q4_0 by int8 block dot products on activations quantized per
//    block); results are always float32 with float32 accumulation.
//  * Index metadata (tokens, positions, KV slots, block tables, masks) lives in a host
//    StepPlan that is prepared once per forward pass (Prepare) and reused by every
//    layer, so a GPU backend uploads it once per step.
//  * Batch invariance: the value an op computes for one row never depends on how many
//    other rows are in the call (fixed reduction order per output element, no kernel
//    switch by row count). Greedy speculative decoding relies on this to be bitwise
//    identical to plain decoding.
//  * Ops are asynchronous with respect to the host on GPU backends; Synchronize()
//    waits for them. CopyToHost synchronizes implicitly.
#ifndef TANDEM_KERNELS_BACKEND_H_
#define TANDEM_KERNELS_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/accept/draft_sample.h"
#include "kernels/accept/verify_accept.h"

namespace tandem {

// Weight element formats. kQ8_0 and kQ4_0 are block-quantized: each row is cut into
// blocks of kQ8BlockSize consecutive values (the last block of a row may be shorter)
// with one f16 scale d per block ([rows, Q8BlocksPerRow(cols)]).
//  * kQ8_0: int8 quants q, one per value (row-major [rows, cols]); value =
//    float(q) * float(d), |q| <= 127.
//  * kQ4_0: 4-bit quants q in [-8, 7] stored as the nibble q + 8, two per byte
//    ([rows, Q4BytesPerRow(cols)]; a row's blocks are consecutive, 16 bytes each but
//    for a short last block of n values, ceil(n / 2) bytes). In a block of n values,
//    value i < h = ceil(n / 2) is the low nibble of the block's byte i and value h + i
//    its high nibble (an unused high nibble is 0); value = float(q) * float(d).
enum class DType { kF32, kF16, kBF16, kQ8_0, kQ4_0 };

constexpr int kQ8BlockSize = 32;

// Scale blocks of one kQ8_0 or kQ4_0 row of `cols` values.
inline int64_t Q8BlocksPerRow(int64_t cols) { return (cols + kQ8BlockSize - 1) / kQ8BlockSize; }

// Bytes of the packed quants of one kQ4_0 row of `cols` values.
inline int64_t Q4BytesPerRow(int64_t cols) { return (cols + 1) / 2; }

// True for the block-quantized formats (kQ8_0, kQ4_0): they carry scales.
inline bool IsBlockQuantized(DType dtype) { return dtype == DType::kQ8_0 || dtype == DType::kQ4_0; }

// Bytes per element of `dtype` (kQ8_0: the int8 quant; its scales are extra). kQ4_0
// has half a byte per element: 0 here, use StoredRowBytes.
size_t DTypeSize(DType dtype);

// Bytes of one stored row of `cols` values of `dtype`, scales not included.
int64_t StoredRowBytes(DType dtype, int64_t cols);

// "f32", "f16", "bf16", "q8_0" or "q4_0".
const char* DTypeName(DType dtype);

// A contiguous allocation in backend memory. Move-only; frees on destruction.
class Buffer {
 public:
  Buffer() = default;
  Buffer(void* data, size_t bytes, std::shared_ptr<void> owner)
      : data_(data), bytes_(bytes), owner_(std::move(owner)) {}
  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }
  size_t bytes() const { return bytes_; }
  bool empty() const { return data_ == nullptr; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::shared_ptr<void> owner_;  // Releases the memory when the last copy goes.
};

// A 2-D weight matrix [rows, cols] in backend memory, or a 1-D vector (rows = 1), in the
// backend's own layout (row-major, but for cpu's tiled q8_0/q4_0). `owner` keeps the
// storage alive (e.g. an mmapped checkpoint on cpu).
struct Weight {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  const void* scales = nullptr;  // cuda kQ8_0/kQ4_0: f16 [rows, Q8BlocksPerRow(cols)].
  int64_t rows = 0;
  int64_t cols = 0;
  std::shared_ptr<const void> owner;
};

// Host-side index metadata of one forward pass over a ragged batch.
//
// Rows are the new tokens of all sequences, concatenated sequence after sequence.
// Sequence s owns rows [row_begin, row_begin + row_count). Its KV cache is paged:
// logical key index L lives in physical slot block_table[L / block_size] * block_size
// + L % block_size. Before this step the sequence has `context_length` keys cached;
// new row i (0-based within the sequence) writes its key/value at logical index
// context_length + i, and attends to keys [0, context_length) plus the new rows that
// are its ancestors or itself: rows 0..i for a chain (parents empty), or the chain of
// parents[] links for a tree (parents[i] < i, -1 = attached to the cached context).
struct StepPlan {
  struct Sequence {
    int row_begin = 0;
    int row_count = 0;
    int context_length = 0;
    std::vector<int32_t> block_table;  // Physical block ids covering all keys.
    std::vector<int32_t> parents;      // Empty = chain; else row_count entries.
  };
  int block_size = 16;             // Tokens per KV block.
  std::vector<int32_t> tokens;     // [rows] token ids.
  std::vector<int32_t> positions;  // [rows] RoPE positions (context_length + depth).
  std::vector<int64_t> kv_slots;   // [rows] physical slot of each new key/value.
  std::vector<Sequence> sequences;
  std::vector<int32_t> logit_rows;  // Rows whose logits are wanted, ascending.

  int num_rows() const { return static_cast<int>(tokens.size()); }
};

// Checks that `plan` is self-consistent: block_size > 0; tokens, positions and kv_slots
// have one entry per row and tokens are >= 0; sequences cover the rows in order without
// gaps; context_length >= 0; each block table covers context_length + row_count keys
// with block ids >= 0; parents is empty or has row_count entries with -1 <= parents[i]
// < i; kv_slots[row_begin + i] is the slot of logical key context_length + i; and
// logit_rows is strictly ascending within [0, rows). INVALID_ARGUMENT names the field.
absl::Status ValidateStepPlan(const StepPlan& plan);

// The checks every backend's UploadQ8Weight / UploadQ4Weight (`dtype` kQ8_0 / kQ4_0)
// makes first: a non-negative shape of at most 2^31 - 1 values, non-null quants and
// scales when it is not empty, 2-byte aligned scales. INVALID_ARGUMENT naming the call.
absl::Status ValidateBlockQuantizedUpload(DType dtype, const void* quants, const void* scales,
                                          int64_t rows, int64_t cols);

// Backend-specific form of a StepPlan (e.g. uploaded to the device). Opaque.
class PreparedStep {
 public:
  virtual ~PreparedStep() = default;
  virtual const StepPlan& plan() const = 0;
};

// Geometry of one layer's paged KV storage: K and V each hold
// [num_blocks, block_size, num_kv_heads, head_dim] values of `dtype` (kF32, kF16 or
// kBF16; a backend states which it supports, Backend::SupportsKvDType).
struct KvLayout {
  int num_blocks = 0;
  int block_size = 16;
  int num_kv_heads = 0;  // Heads held by this rank.
  int head_dim = 0;
  DType dtype = DType::kF32;
  size_t BytesPerTensor() const {
    return size_t(num_blocks) * block_size * num_kv_heads * head_dim * DTypeSize(dtype);
  }
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual std::string name() const = 0;
  // What this instance runs on, for logs (cpu: the SIMD level chosen at run time, the
  // threads and weight formats). The default: name().
  virtual std::string Description() const { return name(); }

  // ---- memory ----
  // Allocates `bytes` of backend memory (zeroed). RESOURCE_EXHAUSTED when it does not fit.
  virtual absl::StatusOr<Buffer> Allocate(size_t bytes) = 0;
  virtual absl::Status CopyToDevice(const void* host, void* device, size_t bytes) = 0;
  virtual absl::Status CopyToHost(const void* device, void* host, size_t bytes) = 0;
  // Copies within backend memory (used for KV block copies when compacting a tree).
  virtual absl::Status CopyOnDevice(const void* src, void* dst, size_t bytes) = 0;
  virtual absl::Status Synchronize() = 0;

  // Makes a weight usable by ops. `data` is host memory of `dtype` holding rows x cols
  // elements; `owner` keeps it alive. A backend may keep the host pointer (cpu, f32)
  // or convert and copy it (cuda: bf16 in device memory).
  virtual absl::StatusOr<Weight> UploadWeight(const void* data, DType dtype, int64_t rows,
                                              int64_t cols, std::shared_ptr<const void> owner) = 0;
  // The same for a kQ8_0 weight: `quants` int8 [rows, cols] and `scales` f16 [rows,
  // Q8BlocksPerRow(cols)] in host memory, kept alive by `owner`. The default answers
  // UNIMPLEMENTED "<name>: q8_0 weights are not supported by this backend yet".
  virtual absl::StatusOr<Weight> UploadQ8Weight(const void* quants, const void* scales,
                                                int64_t rows, int64_t cols,
                                                std::shared_ptr<const void> owner);
  // The same for a kQ4_0 weight: `packed` [rows, Q4BytesPerRow(cols)] and `scales` f16
  // [rows, Q8BlocksPerRow(cols)]. The default answers UNIMPLEMENTED "<name>: q4_0
  // weights are not supported by this backend yet".
  virtual absl::StatusOr<Weight> UploadQ4Weight(const void* packed, const void* scales,
                                                int64_t rows, int64_t cols,
                                                std::shared_ptr<const void> owner);

  // Prepares the metadata of one forward pass; valid until destroyed.
  virtual absl::StatusOr<std::unique_ptr<PreparedStep>> Prepare(const StepPlan& plan) = 0;

  // ---- ops (shapes in elements; see conventions above) ----
  // out[r, :] = table[step.tokens[r], :]. table: [vocab, dim].
  virtual void Embedding(const PreparedStep& step, const Weight& table, float* out) = 0;
  // out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight. x, out: [rows, dim].
  virtual void RmsNorm(const float* x, const Weight& weight, int rows, int dim, float eps,
                       float* out) = 0;
  // out[r, o] = sum_i x[r, i] * w[o, i]. x: [rows, w.cols], out: [rows, w.rows].
  virtual void MatMul(const float* x, int rows, const Weight& w, float* out) = 0;
  // Rotary embedding in place, Hugging Face rotate_half convention: for each row r and
  // head h, with t = step.positions[r] and pairs (j, j + head_dim/2):
  //   x1' = x1 cos(t f_j) - x2 sin(t f_j);  x2' = x2 cos(t f_j) + x1 sin(t f_j).
  // x: [rows, num_heads * head_dim]; inv_freq: host array [head_dim / 2].
  virtual void Rope(const PreparedStep& step, float* x, int num_heads, int head_dim,
                    const float* inv_freq) = 0;
  // Writes each row's key and value into its slot (step.kv_slots), rounded to nearest
  // even when layout.dtype is 16-bit. k, v: [rows, num_kv_heads * head_dim] float32;
  // k_cache, v_cache: per KvLayout.
  virtual void WriteKv(const PreparedStep& step, const float* k, const float* v,
                       const KvLayout& layout, void* k_cache, void* v_cache) = 0;
  // Scaled dot-product attention over the paged cache with the StepPlan's causal/tree
  // mask and grouped-query heads (query head h reads KV head h / (num_heads /
  // num_kv_heads)). Keys are reduced in logical index order. q: [rows, num_heads *
  // head_dim]; out: same shape. scale is usually 1/sqrt(head_dim). 16-bit caches are
  // widened exactly to float32; the math is the float32 attention's.
  virtual void Attention(const PreparedStep& step, const float* q, const KvLayout& layout,
                         const void* k_cache, const void* v_cache, int num_heads, float scale,
                         float* out) = 0;
  // Whether WriteKv/Attention take caches of `dtype`. The default: kF32 only.
  virtual bool SupportsKvDType(DType dtype) const { return dtype == DType::kF32; }
  // out[i] = silu(gate[i]) * up[i] for i < n.
  virtual void SiluMul(const float* gate, const float* up, size_t n, float* out) = 0;
  // x[i] += y[i] for i < n.
  virtual void Add(float* x, const float* y, size_t n) = 0;
  // out[j, :] = x[rows[j], :] for the host index list `rows`. x: [*, dim].
  virtual void GatherRows(const float* x, int dim, const std::vector<int32_t>& rows,
                          float* out) = 0;

  // ---- logits on the host ----
  // Copies `logits` (backend memory: logits.rows * logits.vocab contiguous floats in
  // the view's layout) to the host and replaces *row_major with them as row-major
  // [rows, vocab] (its capacity is reused). A view of parts > 1 is first copied as it
  // is into *staging (capacity reused; a temporary when staging is null). Errors:
  // ValidateLogitsView's or CopyToHost's. Synchronizes.
  absl::Status CopyLogitsToHost(const LogitsView& logits, std::vector<float>* row_major,
                                std::vector<float>* staging = nullptr);

  // ---- verification (kernels/accept/verify_accept.h) ----
  // Runs the sampling transforms and acceptance rule of each chain over `logits`
  // (backend memory: logits.rows * logits.vocab contiguous floats in the view's
  // layout, valid until the call returns) and replaces *outcomes with one outcome per
  // chain, in order. Exactly HostVerifyAccept on the row-major logits: errors of the
  // call (a malformed view, a chain outside the rows, a failed copy) are returned,
  // per-chain acceptance errors are in VerifyOutcome::status. Synchronizes.
  // The default copies the logits to the host and runs HostVerifyAccept there.
  virtual absl::Status VerifyAccept(const LogitsView& logits, absl::Span<const VerifyChain> chains,
                                    std::vector<VerifyOutcome>* outcomes);

  // ---- draft proposals (kernels/accept/draft_sample.h) ----
  // Samples one proposal (token and sparse q) per draft row from `logits` (backend
  // memory, as for VerifyAccept) and replaces *proposals with one proposal per draft
  // row, in order. Exactly HostSampleDrafts on the row-major logits: errors of the
  // call (a malformed view, a row outside the view or a q_size outside [1,
  // kMaxDraftQSize], a failed copy) are returned; a row with no token to propose has
  // its own DraftProposal::status. Synchronizes. The default copies the logits to the
  // host and runs HostSampleDrafts there.
  virtual absl::Status SampleDrafts(const LogitsView& logits, absl::Span<const DraftRow> drafts,
                                    std::vector<DraftProposal>* proposals);
};

}  // namespace tandem

#endif  // TANDEM_KERNELS_BACKEND_H_
