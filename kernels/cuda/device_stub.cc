// Device discovery for builds without nvcc: no devices.
#include "kernels/cuda/device.h"

namespace tandem::cuda {

bool CompiledWithCuda() { return false; }

int DeviceCount(std::string* why_none) {
  if (why_none != nullptr)
    *why_none = "built without CUDA support (nvcc absent at build time, or --config=nocuda)";
  return 0;
}

std::string DeviceDescription(int) { return ""; }

}  // namespace tandem::cuda
