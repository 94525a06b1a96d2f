// CudaBackend: host side of the CUDA backend (contract in cuda_backend.h). Kernels
// live in the *_kernels.cu files; this file validates arguments, owns the stream,
// the cuBLAS handle, memory and the uploaded step metadata, and launches.
//
// Never executed on a GPU in the environment this was written in.
#include "kernels/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "kernels/cpu/half.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/cuda_backend_internal.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/step_layout.h"

namespace tandem {

using cuda::CudaStatus;
using cuda::internal::CudaPreparedStep;

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const CudaBackendOptions& options) {
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess || count == 0) {
    const std::string why = err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device present";
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("CUDA backend: no usable CUDA device: ", why));
  }
  if (options.device < 0 || options.device >= count) {
    return absl::UnavailableError(
        absl::StrCat("CUDA backend: device ", options.device, " requested, ", count, " visible"));
  }
  auto state = std::make_unique<State>();
  state->options = options;
  if (absl::Status s = cuda::SelectDevice(options.device); !s.ok()) return s;
  if (absl::Status s = CudaStatus(cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking),
                                  "cudaStreamCreate", options.device);
      !s.ok()) {
    return s;
  }
  if (options.gemm == CudaBackendOptions::Gemm::kCublas) {
    if (cublasCreate(&state->cublas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(state->cublas, state->stream) != CUBLAS_STATUS_SUCCESS) {
      cudaStreamDestroy(state->stream);
      if (state->cublas != nullptr) cublasDestroy(state->cublas);
      return absl::InternalError(
          absl::StrCat("CUDA backend: cannot create a cuBLAS handle on device ", options.device));
    }
  }
  state->pool = std::make_shared<cuda::DevicePool>(options.device);
  state->staging = std::make_unique<cuda::PinnedStaging>(options.device);
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(state)));
}

CudaBackend::CudaBackend(std::unique_ptr<State> state) : state_(std::move(state)) {}

CudaBackend::~CudaBackend() {
  cudaSetDevice(state_->device());
  cudaStreamSynchronize(state_->stream);
  state_->staging.reset();
  state_->attention_scratch.memory.reset();
  state_->gemm_input.memory.reset();
  state_->inv_freqs.clear();
  if (state_->cublas != nullptr) cublasDestroy(state_->cublas);
  cudaStreamDestroy(state_->stream);
}

int CudaBackend::device() const { return state_->device(); }
CudaBackendOptions::Gemm CudaBackend::gemm() const { return state_->options.gemm; }

void CudaBackend::Record(int cuda_error, const char* op) {
  const cudaError_t err = static_cast<cudaError_t>(cuda_error);
  if (err == cudaSuccess || !state_->first_error.ok()) return;
  state_->first_error = CudaStatus(err, op, state_->device());
  LOG(ERROR) << "CudaBackend: " << state_->first_error;
}

absl::StatusOr<Buffer> CudaBackend::Allocate(size_t bytes) {
  if (!state_->first_error.ok()) return state_->first_error;
  auto memory = cuda::AllocateDeviceMemory(state_->device(), bytes, "a backend buffer");
  if (!memory.ok()) return memory.status();
  // Zero on the stream and wait, so the buffer is ready for any stream (collectives).
  if (bytes > 0) {
    if (absl::Status s = CudaStatus(cudaMemsetAsync(memory->get(), 0, bytes, state_->stream),
                                    "cudaMemsetAsync", state_->device());
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = Synchronize(); !s.ok()) return s;
  void* data = memory->get();
  return Buffer(data, bytes, *std::move(memory));
}

absl::Status CudaBackend::CopyToDevice(const void* host, void* device, size_t bytes) {
  if (bytes == 0) return state_->first_error;
  if (host == nullptr || device == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyToDevice: null pointer for ", bytes, " bytes"));
  }
  if (absl::Status s = cuda::SelectDevice(state_->device()); !s.ok()) return s;
  Record(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, state_->stream),
         "cudaMemcpyAsync (to device)");
  return Synchronize();
}

absl::Status CudaBackend::CopyToHost(const void* device, void* host, size_t bytes) {
  if (bytes == 0) return state_->first_error;
  if (host == nullptr || device == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyToHost: null pointer for ", bytes, " bytes"));
  }
  if (absl::Status s = cuda::SelectDevice(state_->device()); !s.ok()) return s;
  Record(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, state_->stream),
         "cudaMemcpyAsync (to host)");
  return Synchronize();
}

absl::Status CudaBackend::CopyOnDevice(const void* src, void* dst, size_t bytes) {
  if (bytes == 0 || src == dst) return state_->first_error;
  if (src == nullptr || dst == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyOnDevice: null pointer for ", bytes, " bytes"));
  }
  if (absl::Status s = cuda::SelectDevice(state_->device()); !s.ok()) return s;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  if (s < d + bytes && d < s + bytes) {  // Overlap: go through a temporary buffer.
    auto temp = state_->pool->Acquire(bytes);
    if (!temp.ok()) return temp.status();
    Record(cudaMemcpyAsync(temp->get(), src, bytes, cudaMemcpyDeviceToDevice, state_->stream),
           "cudaMemcpyAsync (device, staged)");
    Record(cudaMemcpyAsync(dst, temp->get(), bytes, cudaMemcpyDeviceToDevice, state_->stream),
           "cudaMemcpyAsync (device, staged)");
    return state_->first_error;  // The pool block is reused only by later stream work.
  }
  Record(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, state_->stream),
         "cudaMemcpyAsync (device)");
  return state_->first_error;
}

absl::Status CudaBackend::Synchronize() {
  if (absl::Status s = cuda::SelectDevice(state_->device()); !s.ok()) return s;
  Record(cudaStreamSynchronize(state_->stream), "cudaStreamSynchronize");
  return state_->first_error;
}

absl::StatusOr<Weight> CudaBackend::UploadWeight(const void* data, DType dtype, int64_t rows,
                                                 int64_t cols, std::shared_ptr<const void> owner) {
  if (IsBlockQuantized(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "UploadWeight: ", DTypeName(dtype), " weights go through UploadQ8Weight/UploadQ4Weight"));
  }
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("UploadWeight: negative shape [", rows, ", ", cols, "]"));
  }
  if (cols > 0 && rows > std::numeric_limits<int32_t>::max() / cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("UploadWeight: [", rows, ", ", cols, "] has too many elements"));
  }
  const size_t count = size_t(rows) * size_t(cols);
  if (count > 0 && data == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("UploadWeight: null data for a [", rows, ", ", cols, "] weight"));
  }
  if (!state_->first_error.ok()) return state_->first_error;
  auto memory =
      cuda::AllocateDeviceMemory(state_->device(), count * sizeof(uint16_t),
                                 absl::StrCat("a [", rows, ", ", cols, "] bfloat16 weight"));
  if (!memory.ok()) return memory.status();
  auto* dst = static_cast<uint16_t*>(memory->get());
  if (dtype == DType::kBF16) {
    if (absl::Status s =
            CudaStatus(cudaMemcpy(dst, data, count * sizeof(uint16_t), cudaMemcpyHostToDevice),
                       "cudaMemcpy (weight upload)", state_->device());
        !s.ok()) {
      return s;
    }
  } else {
    // Convert on the host in bounded chunks (round to nearest even, as cpu::FloatToBf16).
    constexpr size_t kChunk = size_t(1) << 22;
    std::vector<uint16_t> converted(std::min(count, kChunk));
    for (size_t begin = 0; begin < count; begin += kChunk) {
      const size_t n = std::min(kChunk, count - begin);
      for (size_t i = 0; i < n; ++i) {
        const float f = dtype == DType::kF32
                            ? static_cast<const float*>(data)[begin + i]
                            : cpu::F16ToFloat(static_cast<const uint16_t*>(data)[begin + i]);
        converted[i] = cpu::FloatToBf16(f);
      }
      if (absl::Status s = CudaStatus(cudaMemcpy(dst + begin, converted.data(),
                                                 n * sizeof(uint16_t), cudaMemcpyHostToDevice),
                                      "cudaMemcpy (weight upload)", state_->device());
          !s.ok()) {
        return s;
      }
    }
  }
  Weight weight;
  weight.data = dst;
  weight.dtype = DType::kBF16;
  weight.rows = rows;
  weight.cols = cols;
  weight.owner = std::shared_ptr<const void>(*std::move(memory));
  (void)owner;  // The host data was copied; it is not needed any more.
  return weight;
}

absl::StatusOr<Weight> CudaBackend::UploadQ8Weight(const void* quants, const void* scales,
                                                   int64_t rows, int64_t cols,
                                                   std::shared_ptr<const void> /*owner*/) {
  return UploadBlockQuantized(DType::kQ8_0, quants, scales, rows, cols);
}

absl::StatusOr<Weight> CudaBackend::UploadQ4Weight(const void* packed, const void* scales,
                                                   int64_t rows, int64_t cols,
                                                   std::shared_ptr<const void> /*owner*/) {
  return UploadBlockQuantized(DType::kQ4_0, packed, scales, rows, cols);
}

absl::StatusOr<Weight> CudaBackend::UploadBlockQuantized(DType dtype, const void* quants,
                                                         const void* scales, int64_t rows,
                                                         int64_t cols) {
  if (absl::Status s = ValidateBlockQuantizedUpload(dtype, quants, scales, rows, cols); !s.ok()) {
    return s;
  }
  if (!state_->first_error.ok()) return state_->first_error;
  // One allocation: the quants, then the f16 scales at a 16-byte aligned offset.
  const size_t quant_bytes = size_t(rows) * size_t(StoredRowBytes(dtype, cols));
  const size_t scale_offset = (quant_bytes + 15) / 16 * 16;
  const size_t scale_bytes = size_t(rows) * size_t(Q8BlocksPerRow(cols)) * sizeof(uint16_t);
  auto memory = cuda::AllocateDeviceMemory(
      state_->device(), std::max<size_t>(scale_offset + scale_bytes, 1),
      absl::StrCat("a [", rows, ", ", cols, "] ", DTypeName(dtype), " weight"));
  if (!memory.ok()) return memory.status();
  auto* base = static_cast<uint8_t*>(memory->get());
  for (const auto& [dst, src, bytes] :
       {std::make_tuple(base, quants, quant_bytes),
        std::make_tuple(base + scale_offset, scales, scale_bytes)}) {
    if (bytes == 0) continue;
    if (absl::Status s = CudaStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice),
                                    "cudaMemcpy (weight upload)", state_->device());
        !s.ok()) {
      return s;
    }
  }
  Weight weight;
  weight.data = base;
  weight.dtype = dtype;
  weight.scales = base + scale_offset;
  weight.rows = rows;
  weight.cols = cols;
  weight.owner = std::shared_ptr<const void>(*std::move(memory));
  return weight;  // The host data was copied; `owner` is not needed any more.
}

absl::StatusOr<std::unique_ptr<PreparedStep>> CudaBackend::Prepare(const StepPlan& plan) {
  absl::StatusOr<cuda::StepLayout> layout = cuda::BuildStepLayout(plan, cuda::kAttentionChunkKeys);
  if (!layout.ok()) return layout.status();
  if (!state_->first_error.ok()) return state_->first_error;
  if (absl::Status s = cuda::SelectDevice(state_->device()); !s.ok()) return s;
  auto device = state_->pool->Acquire(layout->blob.size());
  if (!device.ok()) return device.status();
  if (absl::Status s = state_->staging->Stage(layout->blob.data(), layout->blob.size(),
                                              device->get(), state_->stream);
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<PreparedStep>(
      new CudaPreparedStep(plan, *std::move(layout), *std::move(device)));
}

}  // namespace tandem
