// A Backend that forwards every call to another and adds up the wall time of each op
// kind (model_bench --profile). Not thread-safe; the inner backend must outlive it.
#ifndef TANDEM_BENCH_TIMING_BACKEND_H_
#define TANDEM_BENCH_TIMING_BACKEND_H_

#include <algorithm>
#include <chrono>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"

namespace tandem {
namespace bench {

// A Backend that forwards to another and adds up the wall time of each op kind.
class TimingBackend : public Backend {
 public:
  enum Op {
    kPrepare,
    kEmbedding,
    kRmsNorm,
    kMatMul,
    kRope,
    kWriteKv,
    kAttention,
    kSiluMul,
    kAdd,
    kGatherRows,
    kCopy,
    kNumOps
  };
  static constexpr const char* kNames[kNumOps] = {"Prepare", "Embedding",  "RmsNorm",   "MatMul",
                                                  "Rope",    "WriteKv",    "Attention", "SiluMul",
                                                  "Add",     "GatherRows", "Copy"};

  explicit TimingBackend(Backend* inner) : inner_(inner) {}
  // Runs fn() and adds its wall time to `op`.
  template <typename Fn>
  auto Time(Op op, const Fn& fn) {
    const auto start = std::chrono::steady_clock::now();
    auto result = fn();
    seconds_[op] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  void Reset() { std::fill(std::begin(seconds_), std::end(seconds_), 0.0); }
  double seconds(int op) const { return seconds_[op]; }

  std::string name() const override { return inner_->name(); }
  std::string Description() const override { return inner_->Description(); }
  absl::StatusOr<Buffer> Allocate(size_t bytes) override { return inner_->Allocate(bytes); }
  absl::Status CopyToDevice(const void* h, void* d, size_t n) override {
    return Time(kCopy, [&] { return inner_->CopyToDevice(h, d, n); });
  }
  absl::Status CopyToHost(const void* d, void* h, size_t n) override {
    return Time(kCopy, [&] { return inner_->CopyToHost(d, h, n); });
  }
  absl::Status CopyOnDevice(const void* s, void* d, size_t n) override {
    return Time(kCopy, [&] { return inner_->CopyOnDevice(s, d, n); });
  }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  absl::StatusOr<Weight> UploadWeight(const void* data, DType dtype, int64_t rows, int64_t cols,
                                      std::shared_ptr<const void> owner) override {
    return inner_->UploadWeight(data, dtype, rows, cols, std::move(owner));
  }
  absl::StatusOr<Weight> UploadQ8Weight(const void* quants, const void* scales, int64_t rows,
                                        int64_t cols, std::shared_ptr<const void> owner) override {
    return inner_->UploadQ8Weight(quants, scales, rows, cols, std::move(owner));
  }
  absl::StatusOr<Weight> UploadQ4Weight(const void* packed, const void* scales, int64_t rows,
                                        int64_t cols, std::shared_ptr<const void> owner) override {
    return inner_->UploadQ4Weight(packed, scales, rows, cols, std::move(owner));
  }
  bool SupportsKvDType(DType dtype) const override { return inner_->SupportsKvDType(dtype); }
  absl::StatusOr<std::unique_ptr<PreparedStep>> Prepare(const StepPlan& plan) override {
    return Time(kPrepare, [&] { return inner_->Prepare(plan); });
  }
  void Embedding(const PreparedStep& step, const Weight& table, float* out) override {
    Time(kEmbedding, [&] {
      inner_->Embedding(step, table, out);
      return 0;
    });
  }
  void RmsNorm(const float* x, const Weight& w, int rows, int dim, float eps, float* out) override {
    Time(kRmsNorm, [&] {
      inner_->RmsNorm(x, w, rows, dim, eps, out);
      return 0;
    });
  }
  void MatMul(const float* x, int rows, const Weight& w, float* out) override {
    Time(kMatMul, [&] {
      inner_->MatMul(x, rows, w, out);
      return 0;
    });
  }
  void Rope(const PreparedStep& step, float* x, int heads, int head_dim,
            const float* inv_freq) override {
    Time(kRope, [&] {
      inner_->Rope(step, x, heads, head_dim, inv_freq);
      return 0;
    });
  }
  void WriteKv(const PreparedStep& step, const float* k, const float* v, const KvLayout& layout,
               void* kc, void* vc) override {
    Time(kWriteKv, [&] {
      inner_->WriteKv(step, k, v, layout, kc, vc);
      return 0;
    });
  }
  void Attention(const PreparedStep& step, const float* q, const KvLayout& layout, const void* kc,
                 const void* vc, int heads, float scale, float* out) override {
    Time(kAttention, [&] {
      inner_->Attention(step, q, layout, kc, vc, heads, scale, out);
      return 0;
    });
  }
  void SiluMul(const float* g, const float* u, size_t n, float* out) override {
    Time(kSiluMul, [&] {
      inner_->SiluMul(g, u, n, out);
      return 0;
    });
  }
  void Add(float* x, const float* y, size_t n) override {
    Time(kAdd, [&] {
      inner_->Add(x, y, n);
      return 0;
    });
  }
  void GatherRows(const float* x, int dim, const std::vector<int32_t>& rows, float* out) override {
    Time(kGatherRows, [&] {
      inner_->GatherRows(x, dim, rows, out);
      return 0;
    });
  }

 private:
  Backend* inner_;
  double seconds_[kNumOps] = {};
};

}  // namespace bench
}  // namespace tandem

#endif  // TANDEM_BENCH_TIMING_BACKEND_H_
