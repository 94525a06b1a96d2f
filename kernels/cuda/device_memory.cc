#include "kernels/cuda/device_memory.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::cuda {
namespace {

constexpr size_t kMinPoolBlock = 4096;

size_t RoundUpPow2(size_t n) {
  size_t p = kMinPoolBlock;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

absl::Status CudaStatus(cudaError_t err, absl::string_view op, int device) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(op, " on CUDA device ", device, ": ",
                                           cudaGetErrorName(err), ": ", cudaGetErrorString(err));
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status SelectDevice(int device) {
  return CudaStatus(cudaSetDevice(device), "cudaSetDevice", device);
}

absl::StatusOr<std::shared_ptr<void>> AllocateDeviceMemory(int device, size_t bytes,
                                                           absl::string_view what) {
  if (absl::Status s = SelectDevice(device); !s.ok()) return s;
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes == 0 ? 1 : bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // cudaMalloc failures are not sticky; clear the record.
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    const std::string message = absl::StrCat(
        "cannot allocate ", bytes, " bytes for ", what, " on CUDA device ", device, " (",
        free_bytes, " of ", total_bytes, " bytes free): ", cudaGetErrorString(err));
    if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
    return absl::InternalError(message);
  }
  return std::shared_ptr<void>(ptr, [device](void* p) {
    cudaSetDevice(device);
    cudaFree(p);
  });
}

DevicePool::~DevicePool() {
  if (free_.empty()) return;
  cudaSetDevice(device_);
  for (auto& [size, block] : free_) cudaFree(block);
}

absl::StatusOr<std::shared_ptr<void>> DevicePool::Acquire(size_t bytes) {
  const size_t size = RoundUpPow2(bytes);
  void* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(size);
    if (it != free_.end()) {
      block = it->second;
      free_.erase(it);
    }
  }
  if (block == nullptr) {
    if (absl::Status s = SelectDevice(device_); !s.ok()) return s;
    const cudaError_t err = cudaMalloc(&block, size);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return CudaStatus(err, absl::StrCat("cudaMalloc of a ", size, "-byte step buffer"), device_);
    }
  }
  std::shared_ptr<DevicePool> self = shared_from_this();
  return std::shared_ptr<void>(block, [self, size](void* p) { self->Release(p, size); });
}

void DevicePool::Release(void* block, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.emplace(size, block);
}

PinnedStaging::~PinnedStaging() {
  if (buffer_ == nullptr && done_ == nullptr) return;
  cudaSetDevice(device_);
  if (done_ != nullptr) {
    cudaEventSynchronize(done_);
    cudaEventDestroy(done_);
  }
  if (buffer_ != nullptr) cudaFreeHost(buffer_);
}

absl::Status PinnedStaging::Stage(const void* src, size_t bytes, void* dst, cudaStream_t stream) {
  if (bytes == 0) return absl::OkStatus();
  if (done_ == nullptr) {
    if (absl::Status s = CudaStatus(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming),
                                    "cudaEventCreate", device_);
        !s.ok()) {
      return s;
    }
  }
  if (pending_) {
    if (absl::Status s =
            CudaStatus(cudaEventSynchronize(done_), "waiting for a staged copy", device_);
        !s.ok()) {
      return s;
    }
    pending_ = false;
  }
  if (bytes > capacity_) {
    if (buffer_ != nullptr) cudaFreeHost(buffer_);
    buffer_ = nullptr;
    capacity_ = 0;
    size_t size = RoundUpPow2(bytes);
    if (absl::Status s = CudaStatus(cudaHostAlloc(&buffer_, size, cudaHostAllocDefault),
                                    absl::StrCat("cudaHostAlloc of ", size, " bytes"), device_);
        !s.ok()) {
      buffer_ = nullptr;
      return s;
    }
    capacity_ = size;
  }
  std::memcpy(buffer_, src, bytes);
  if (absl::Status s =
          CudaStatus(cudaMemcpyAsync(dst, buffer_, bytes, cudaMemcpyHostToDevice, stream),
                     "cudaMemcpyAsync (staged upload)", device_);
      !s.ok()) {
    return s;
  }
  pending_ = true;
  return CudaStatus(cudaEventRecord(done_, stream), "cudaEventRecord", device_);
}

}  // namespace tandem::cuda
