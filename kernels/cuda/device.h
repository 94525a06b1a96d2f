// CUDA device discovery. Available in every build: without CUDA support compiled in
// (no nvcc at build time) it reports no devices and says why.
#ifndef TANDEM_KERNELS_CUDA_DEVICE_H_
#define TANDEM_KERNELS_CUDA_DEVICE_H_

#include <string>

namespace tandem::cuda {

// True when this binary was built with nvcc.
bool CompiledWithCuda();

// Number of usable CUDA devices; 0 when none, when the driver is missing, or when
// CUDA support was not compiled in. `why_none` (optional) receives the reason.
int DeviceCount(std::string* why_none = nullptr);

// "NAME (sm_XY, N GiB)" of device `index`, or an empty string when unavailable.
std::string DeviceDescription(int index);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_DEVICE_H_
