#include "kernels/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string& name, int threads,
                                                     int device) {
  if (name == "cpu") return MakeCpuBackend(threads);
  if (name != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("unknown backend '", name, "' (cpu or cuda)"));
  }
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA device ", device, " is negative"));
  }
  if (!cuda::CompiledWithCuda()) {
    return absl::UnimplementedError(
        "CUDA backend not available in this build (built without CUDA support; use "
        "--backend=cpu)");
  }
  std::string why;
  const int devices = cuda::DeviceCount(&why);
  if (devices == 0) {
    return absl::UnavailableError(
        absl::StrCat("CUDA backend not available on this machine: ", why, " (use --backend=cpu)"));
  }
  CudaBackendOptions options;
  options.device = device % devices;
  auto backend = MakeCudaBackend(options);
  if (!backend.ok()) {
    return absl::Status(backend.status().code(),
                        absl::StrCat("CUDA backend not available: ", backend.status().message()));
  }
  return backend;
}

}  // namespace tandem
