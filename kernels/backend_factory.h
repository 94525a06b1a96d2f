// Creates a compute backend by name, for binaries that let the user choose
// (e.g. tandem-worker --backend).
#ifndef TANDEM_KERNELS_BACKEND_FACTORY_H_
#define TANDEM_KERNELS_BACKEND_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace tandem {

// "cpu": CpuBackend with `threads` threads (<= 0: one per hardware thread); `device` is
// ignored.
// "cuda": CudaBackend (batch-invariant GEMM) on CUDA device `device` modulo the number
// of visible devices, so rank r of a group passing device = r lands on device
// r % devices, as the nccl communicator's default does; `threads` is ignored.
// Errors: INVALID_ARGUMENT for another name or a negative device; for cuda,
// UNIMPLEMENTED in a build without CUDA and UNAVAILABLE when no device is usable
// (both messages start with "CUDA backend not available").
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string& name, int threads,
                                                     int device);

}  // namespace tandem

#endif  // TANDEM_KERNELS_BACKEND_FACTORY_H_
