// CudaBackendOptions helpers, built with and without CUDA.
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_backend.h"

namespace tandem {

absl::StatusOr<CudaBackendOptions::Gemm> ParseGemmMode(const std::string& name) {
  if (name == "batch_invariant") return CudaBackendOptions::Gemm::kBatchInvariant;
  if (name == "cublas") return CudaBackendOptions::Gemm::kCublas;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown GEMM mode '", name, "' (batch_invariant or cublas)"));
}

const char* GemmModeName(CudaBackendOptions::Gemm gemm) {
  return gemm == CudaBackendOptions::Gemm::kCublas ? "cublas" : "batch_invariant";
}

}  // namespace tandem
