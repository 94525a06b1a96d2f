#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/cuda/device.h"

namespace tandem::cuda {

bool CompiledWithCuda() { return true; }

int DeviceCount(std::string* why_none) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why_none != nullptr) *why_none = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  if (count == 0 && why_none != nullptr) *why_none = "no CUDA device present";
  return count;
}

std::string DeviceDescription(int index) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return "";
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s (sm_%d%d, %.0f GiB)", prop.name, prop.major, prop.minor,
                prop.totalGlobalMem / double(1 << 30));
  return buf;
}

}  // namespace tandem::cuda
