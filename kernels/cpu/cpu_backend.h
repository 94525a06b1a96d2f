// The CPU implementation of Backend: host memory (64-byte aligned, zeroed), weights
// used in place as stored (f32, bf16 and f16 matrices, zero copy: the matmul widens
// 16-bit values in registers; 16-bit vectors, the norm weights, are widened once at
// upload), q8_0 and q4_0 matrices copied at upload into the 16-column tiles of
// kernels/cpu/quantized_tiles.h (the same bytes, regrouped; the source's whole pages are
// then advised out of memory, MADV_PAGEOUT, so a mapped file's pages leave the resident
// set) and multiplied by int8 block dot products on activations quantized per block,
// and threaded
// kernels with an AVX2+FMA path chosen at run time and a portable C++ path
// (TANDEM_CPU_SIMD=portable forces the latter). It is the reference backend the CUDA
// one is tested against. Every op is batch invariant (see kernels/backend.h).
//
// Op preconditions the model code must meet (violations are programming errors and
// abort with a message rather than corrupt memory where checking is cheap): weights
// come from this backend's UploadWeight/UploadQ8Weight; Embedding tokens are < table.rows;
// Attention block ids are < layout.num_blocks and num_heads % num_kv_heads == 0;
// Rope's head_dim is even; steps come from this backend's Prepare.
#ifndef TANDEM_KERNELS_CPU_CPU_BACKEND_H_
#define TANDEM_KERNELS_CPU_CPU_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace tandem {

class CpuBackend : public Backend {
 public:
  // `threads` counts the calling thread; <= 0 means one per hardware thread.
  // `level` defaults to cpu::DetectSimdLevel(); a level this CPU lacks falls back to the
  // highest one it has (cpu::SupportedSimdLevel).
  explicit CpuBackend(int threads);
  CpuBackend(int threads, cpu::SimdLevel level);

  int num_threads() const { return pool_.num_threads(); }
  cpu::SimdLevel simd_level() const { return level_; }

  std::string name() const override { return "cpu"; }
  // The kernels chosen at run time, e.g. "cpu: avx2 kernels, 2 threads; matmul weights
  // ..." (tandem-worker logs it at start, model_bench prints it).
  std::string Description() const override;

  absl::StatusOr<Buffer> Allocate(size_t bytes) override;
  absl::Status CopyToDevice(const void* host, void* device, size_t bytes) override;
  absl::Status CopyToHost(const void* device, void* host, size_t bytes) override;
  absl::Status CopyOnDevice(const void* src, void* dst, size_t bytes) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

  // Host memory for a weight copy written whole before use (not zeroed): 2 MB aligned,
  // its whole 2 MB pages advised to be huge pages (MADV_HUGEPAGE, honoured where
  // transparent huge pages are "madvise" or "always"; the tail past the last whole one
  // stays on small pages, so no more than `bytes` becomes resident). A tiled q8_0/q4_0
  // matrix is read as a few long sequential streams, which stalled at every 4 KB page
  // boundary (bench/README.md, "Quantized tiles"). RESOURCE_EXHAUSTED when it fails.
  static absl::StatusOr<Buffer> AllocateWeightPages(size_t bytes);

  absl::StatusOr<Weight> UploadWeight(const void* data, DType dtype, int64_t rows, int64_t cols,
                                      std::shared_ptr<const void> owner) override;
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
  void WriteKv(const PreparedStep& step, const float* k, const float* v, const KvLayout& layout,
               void* k_cache, void* v_cache) override;
  void Attention(const PreparedStep& step, const float* q, const KvLayout& layout,
                 const void* k_cache, const void* v_cache, int num_heads, float scale,
                 float* out) override;
  // f32, f16 and bf16 caches.
  bool SupportsKvDType(DType dtype) const override { return !IsBlockQuantized(dtype); }
  void SiluMul(const float* gate, const float* up, size_t n, float* out) override;
  void Add(float* x, const float* y, size_t n) override;
  void GatherRows(const float* x, int dim, const std::vector<int32_t>& rows, float* out) override;

 private:
  // The checks and the tiled copy of UploadQ8Weight / UploadQ4Weight (`dtype` kQ8_0 /
  // kQ4_0); `owner` is not kept.
  absl::StatusOr<Weight> UploadBlockQuantized(DType dtype, const void* quants, const void* scales,
                                              int64_t rows, int64_t cols,
                                              std::shared_ptr<const void> owner);

  cpu::SimdLevel level_;
  cpu::ThreadPool pool_;
};

// Factory: a CpuBackend with `threads` threads.
std::unique_ptr<Backend> MakeCpuBackend(int threads);

}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_CPU_BACKEND_H_
