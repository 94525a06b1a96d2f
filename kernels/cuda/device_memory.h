// Device memory helpers of the CUDA backend: error statuses, plain cudaMalloc
// allocations with clear out-of-memory messages, a small caching pool for per-step
// buffers, and a pinned host staging buffer for uploads. Host code (no kernels).
//
// Run on an H200 by the GPU tests (tools/gpu_check.sh).
#ifndef TANDEM_KERNELS_CUDA_DEVICE_MEMORY_H_
#define TANDEM_KERNELS_CUDA_DEVICE_MEMORY_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::cuda {

// OK for cudaSuccess; else INTERNAL (RESOURCE_EXHAUSTED for out-of-memory) saying
// "<op> on CUDA device <device>: <error name>: <error string>".
absl::Status CudaStatus(cudaError_t err, absl::string_view op, int device);

// Makes `device` current for the calling thread.
absl::Status SelectDevice(int device);

// cudaMalloc of max(bytes, 1) bytes on `device`; the returned pointer frees the memory
// (cudaFree on that device, which waits for pending work) when the last copy goes.
// RESOURCE_EXHAUSTED naming `what`, the size and the device's free/total memory.
absl::StatusOr<std::shared_ptr<void>> AllocateDeviceMemory(int device, size_t bytes,
                                                           absl::string_view what);

// Caches device blocks (power-of-two sizes from 4 KiB) so per-step buffers cost no
// cudaMalloc/cudaFree after warm-up. A block returns to the pool when the last
// reference to it goes; reusing it is safe for work ordered on one stream. Blocks are
// freed when the pool (kept alive by outstanding blocks) is destroyed. Thread-safe.
class DevicePool : public std::enable_shared_from_this<DevicePool> {
 public:
  explicit DevicePool(int device) : device_(device) {}
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  absl::StatusOr<std::shared_ptr<void>> Acquire(size_t bytes);

 private:
  void Release(void* block, size_t size);

  const int device_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;  // size -> block
};

// A grow-only pinned host buffer for host-to-device copies on one stream. Stage()
// waits until the previous staged copy has been consumed, copies `bytes` from `src`
// into the buffer, enqueues the copy to `dst` on `stream` and records an event.
class PinnedStaging {
 public:
  explicit PinnedStaging(int device) : device_(device) {}
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  absl::Status Stage(const void* src, size_t bytes, void* dst, cudaStream_t stream);

 private:
  const int device_;
  void* buffer_ = nullptr;
  size_t capacity_ = 0;
  cudaEvent_t done_ = nullptr;
  bool pending_ = false;
};

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_DEVICE_MEMORY_H_
