// Internal to the CUDA backend (cuda_backend.cc, cuda_backend_ops.cc): the backend's
// state and its PreparedStep. Not a public interface.
#ifndef TANDEM_KERNELS_CUDA_CUDA_BACKEND_INTERNAL_H_
#define TANDEM_KERNELS_CUDA_CUDA_BACKEND_INTERNAL_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "glog/logging.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/step_layout.h"

namespace tandem {
namespace cuda {
namespace internal {

// A StepPlan copy, its packed layout (offsets and host-side facts) and the uploaded
// arrays (device memory from the backend's pool).
class CudaPreparedStep : public PreparedStep {
 public:
  CudaPreparedStep(const StepPlan& plan, StepLayout layout, std::shared_ptr<void> device)
      : plan_(plan), layout_(std::move(layout)), device_(std::move(device)) {
    layout_.blob.clear();  // Uploaded; only the offsets and facts are needed now.
    layout_.blob.shrink_to_fit();
  }
  const StepPlan& plan() const override { return plan_; }
  const StepLayout& layout() const { return layout_; }
  template <typename T>
  const T* Device(size_t offset) const {
    return reinterpret_cast<const T*>(static_cast<const uint8_t*>(device_.get()) + offset);
  }

 private:
  const StepPlan plan_;
  StepLayout layout_;
  std::shared_ptr<void> device_;
};

inline const CudaPreparedStep& AsCudaStep(const PreparedStep& step) {
  const auto* cuda_step = dynamic_cast<const CudaPreparedStep*>(&step);
  CHECK(cuda_step != nullptr) << "PreparedStep was not made by CudaBackend::Prepare";
  return *cuda_step;
}

inline const uint16_t* Bf16Data(const Weight& w, const char* op) {
  CHECK(w.dtype == DType::kBF16 && w.data != nullptr)
      << op << ": weight is not a bfloat16 device weight (upload it with "
      << "CudaBackend::UploadWeight)";
  return static_cast<const uint16_t*>(w.data);
}

// Device memory that grows to the high-water mark.
struct GrowBuffer {
  std::shared_ptr<void> memory;
  size_t bytes = 0;
};

}  // namespace internal
}  // namespace cuda

struct CudaBackend::State {
  CudaBackendOptions options;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  std::shared_ptr<cuda::DevicePool> pool;
  std::unique_ptr<cuda::PinnedStaging> staging;
  absl::Status first_error;
  cuda::internal::GrowBuffer attention_scratch, gemm_input;
  // Quantized activations for a q8_0/q4_0 MatMul: int8 quants, then float32 scales.
  cuda::internal::GrowBuffer gemm_quants;
  // RoPE inverse frequencies uploaded so far (the model passes the same few arrays).
  std::vector<std::pair<std::vector<float>, std::shared_ptr<void>>> inv_freqs;

  int device() const { return options.device; }

  // Makes `buffer` hold at least `bytes`; before replacing a smaller buffer it waits
  // for the stream, since queued work may still read it.
  absl::Status Grow(cuda::internal::GrowBuffer& buffer, size_t bytes, const char* what) {
    if (buffer.bytes >= bytes) return absl::OkStatus();
    if (buffer.memory != nullptr) {
      absl::Status s =
          cuda::CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize", device());
      if (!s.ok()) return s;
      buffer.memory.reset();
    }
    const size_t size = std::max(bytes, buffer.bytes * 2);
    buffer.bytes = 0;
    auto memory = cuda::AllocateDeviceMemory(device(), size, what);
    if (!memory.ok()) return memory.status();
    buffer.memory = *std::move(memory);
    buffer.bytes = size;
    return absl::OkStatus();
  }
};

}  // namespace tandem

#endif  // TANDEM_KERNELS_CUDA_CUDA_BACKEND_INTERNAL_H_
