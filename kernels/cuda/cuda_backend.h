// The CUDA implementation of Backend (kernels/backend.h) on one GPU.
//
// Memory: plain cudaMalloc (no managed memory). Buffers from Allocate are zeroed
// device memory; per-step index arrays come from a small caching pool. Every op is
// enqueued on the backend's own non-blocking stream, so ops are asynchronous with
// respect to the host; Synchronize, CopyToHost and CopyToDevice wait for the stream.
//
// KV caches: float32, f16 or bf16 (KvLayout::dtype).
//
// Weights: UploadWeight converts f32/f16/bf16 host data to bfloat16 (round to nearest
// even) in device memory, matrices and vectors alike; UploadQ8Weight/UploadQ4Weight
// keep q8_0/q4_0 matrices as stored. Activations and all results are float32.
//
// GEMM (MatMul) has two modes:
//  * kBatchInvariant (default): own kernel, bf16 weights times float32 activations
//    with float32 accumulation in an order fixed by the weight shape alone, so a
//    row's result never depends on the other rows (greedy speculative decoding stays
//    bitwise identical to plain decoding). Memory-bound at decode/verify sizes.
//  * kCublas: cublasGemmEx with bf16 inputs (activations rounded to bf16 first) and
//    float32 accumulation (CUBLAS_COMPUTE_32F). Faster for large row counts
//    (prefill), but cuBLAS picks kernels by shape, so it is NOT batch invariant.
// q8_0/q4_0 weights use the integer kernels of quantized_gemm_kernels.h in both modes
// (activations quantized per block of 32, int8 dot products, the CPU backend's order:
// bitwise its result).
// Attention, RMSNorm, RoPE and the element-wise ops are batch invariant in both modes
// (see the *_kernels.h headers for their reduction orders).
//
// Step metadata: Prepare validates the StepPlan (ValidateStepPlan), derives the
// attention key lists and uploads everything once per forward pass through a pinned
// staging buffer. A PreparedStep must not outlive its backend.
//
// Errors: ops return void (per the interface); a failed launch is recorded and the
// first such error is returned by every later Synchronize/Copy*/extra op (a CUDA fault
// leaves the device context unusable, so the error is sticky). Violated
// preconditions that the model code guarantees (tokens within the embedding table,
// slots and block ids within the cache, weights from this backend) abort with a
// message, as in the CPU backend.
//
// Threading: one thread at a time (any thread: every entry point selects the device).
//
// NOT VERIFIED ON A GPU: this code was compiled and linked, and its host-side logic
// tested, on machines without a CUDA device. The kernel and model tests in
// kernels/cuda/ compare it with the CPU backend and run wherever a device exists
// (tools/gpu_check.sh).
//
// In a build without CUDA, Create/MakeCudaBackend return UNIMPLEMENTED and no other
// member may be called.
#ifndef TANDEM_KERNELS_CUDA_CUDA_BACKEND_H_
#define TANDEM_KERNELS_CUDA_CUDA_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace tandem {

struct CudaBackendOptions {
  enum class Gemm { kBatchInvariant, kCublas };
  int device = 0;                     // CUDA device index, [0, visible devices).
  Gemm gemm = Gemm::kBatchInvariant;  // See the header comment.
};

// "batch_invariant" or "cublas"; INVALID_ARGUMENT for anything else.
absl::StatusOr<CudaBackendOptions::Gemm> ParseGemmMode(const std::string& name);
const char* GemmModeName(CudaBackendOptions::Gemm gemm);

class CudaBackend : public Backend {
 public:
  // Opens `options.device` and creates the stream (and the cuBLAS handle in kCublas
  // mode). UNAVAILABLE when there is no such usable device; UNIMPLEMENTED when this
  // binary was built without CUDA.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  int device() const;
  CudaBackendOptions::Gemm gemm() const;

  absl::StatusOr<Buffer> Allocate(size_t bytes) override;
  absl::Status CopyToDevice(const void* host, void* device, size_t bytes) override;
  absl::Status CopyToHost(const void* device, void* host, size_t bytes) override;
  // Enqueued on the stream (returns before the copy is done); overlapping ranges are
  // staged through a temporary buffer.
  absl::Status CopyOnDevice(const void* src, void* dst, size_t bytes) override;
  absl::Status Synchronize() override;

  absl::StatusOr<Weight> UploadWeight(const void* data, DType dtype, int64_t rows, int64_t cols,
                                      std::shared_ptr<const void> owner) override;
  // q8_0 / q4_0 matrices (layouts in kernels/backend.h) are copied to device memory as
  // stored, quants and f16 scales; MatMul multiplies them by the integer kernels of
  // quantized_gemm_kernels.h (bitwise the CPU backend's result, in both GEMM modes).
  // INVALID_ARGUMENT for a bad shape or null data; the host data is not kept.
  absl::StatusOr<Weight> UploadQ8Weight(const void* quants, const void* scales, int64_t rows,
                                        int64_t cols, std::shared_ptr<const void> owner) override;
  absl::StatusOr<Weight> UploadQ4Weight(const void* packed, const void* scales, int64_t rows,
                                        int64_t cols, std::shared_ptr<const void> owner) override;

  absl::StatusOr<std::unique_ptr<PreparedStep>> Prepare(const StepPlan& plan) override;

  void Embedding(const PreparedStep& step, const Weight& table, float* out) override;
  void RmsNorm(const float* x, const Weight& weight, int rows, int dim, float eps,
               float* out) override;
  void MatMul(const float* x, int rows, const Weight& w, float* out) override;
  void Rope(const PreparedStep& step, float* x, int num_heads, int head_dim,
            const float* inv_freq) override;
  // float32, f16 or bf16 caches (SupportsKvDType): 16-bit values are rounded by
  // cpu::FloatToF16 / FloatToBf16 on write and widened exactly on read, so the cache
  // holds the CPU backend's bits and the math is the float32 attention's.
  bool SupportsKvDType(DType dtype) const override {
    return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
  }
  void WriteKv(const PreparedStep& step, const float* k, const float* v, const KvLayout& layout,
               void* k_cache, void* v_cache) override;
  void Attention(const PreparedStep& step, const float* q, const KvLayout& layout,
                 const void* k_cache, const void* v_cache, int num_heads, float scale,
                 float* out) override;
  void SiluMul(const float* gate, const float* up, size_t n, float* out) override;
  void Add(float* x, const float* y, size_t n) override;
  // `out` must not overlap `x`. Consecutive source rows are copied as one block.
  void GatherRows(const float* x, int dim, const std::vector<int32_t>& rows, float* out) override;

  // Processes the verify rows and runs the acceptance rules on the device
  // (kernels/cuda/accept_kernels.h): the packed chains and trees go up, only the
  // committed tokens, their log-probabilities, a tree's accepted path and a status per
  // chain come back. Same results as the reference up to the rounding noted in
  // kernels/accept/accept_algorithm.h and tree_accept_algorithm.h.
  absl::Status VerifyAccept(const LogitsView& logits, absl::Span<const VerifyChain> chains,
                            std::vector<VerifyOutcome>* outcomes) override;
  // Samples the draft proposals on the device (kernels/cuda/accept_kernels.h): only each
  // row's token and sparse q come back. Same results as the reference up to the
  // rounding noted in kernels/accept/accept_algorithm.h.
  absl::Status SampleDrafts(const LogitsView& logits, absl::Span<const DraftRow> drafts,
                            std::vector<DraftProposal>* proposals) override;

  // Free and total bytes of device memory (cudaMemGetInfo).
  absl::Status MemoryInfo(size_t* free_bytes, size_t* total_bytes);

 private:
  struct State;
  explicit CudaBackend(std::unique_ptr<State> state);
  void Record(int cuda_error, const char* op);
  absl::StatusOr<Weight> UploadBlockQuantized(DType dtype, const void* quants, const void* scales,
                                              int64_t rows, int64_t cols);
  // MatMul for a q8_0 / q4_0 weight: quantizes x into scratch, then the integer GEMM.
  void QuantizedMatMul(const float* x, int rows, const Weight& w, float* out);

  std::unique_ptr<State> state_;
};

// CudaBackend::Create as a plain Backend.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions& options);

}  // namespace tandem

#endif  // TANDEM_KERNELS_CUDA_CUDA_BACKEND_H_
