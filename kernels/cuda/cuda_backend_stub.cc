// CudaBackend in a build without CUDA: Create fails with UNIMPLEMENTED, so no backend
// object ever exists; the members are defined only so that code written against the
// class (tests, tools) links in every build.
#include "glog/logging.h"
#include "kernels/cuda/cuda_backend.h"

namespace tandem {

struct CudaBackend::State {};

namespace {

absl::Status NotBuilt() {
  return absl::UnimplementedError(
      "CUDA backend not available in this build (built without CUDA support: nvcc was absent "
      "at build time, or --config=nocuda)");
}

[[noreturn]] void Unreachable() { LOG(FATAL) << "CudaBackend used in a build without CUDA"; }

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaBackendOptions&) {
  return NotBuilt();
}
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions&) {
  return NotBuilt();
}

CudaBackend::CudaBackend(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaBackend::~CudaBackend() = default;
int CudaBackend::device() const { Unreachable(); }
CudaBackendOptions::Gemm CudaBackend::gemm() const { Unreachable(); }
void CudaBackend::Record(int, const char*) { Unreachable(); }
absl::StatusOr<Buffer> CudaBackend::Allocate(size_t) { return NotBuilt(); }
absl::Status CudaBackend::CopyToDevice(const void*, void*, size_t) { return NotBuilt(); }
absl::Status CudaBackend::CopyToHost(const void*, void*, size_t) { return NotBuilt(); }
absl::Status CudaBackend::CopyOnDevice(const void*, void*, size_t) { return NotBuilt(); }
absl::Status CudaBackend::Synchronize() { return NotBuilt(); }
absl::StatusOr<Weight> CudaBackend::UploadWeight(const void*, DType, int64_t, int64_t,
                                                 std::shared_ptr<const void>) {
  return NotBuilt();
}
absl::StatusOr<Weight> CudaBackend::UploadQ8Weight(const void*, const void*, int64_t, int64_t,
                                                   std::shared_ptr<const void>) {
  return NotBuilt();
}
absl::StatusOr<Weight> CudaBackend::UploadQ4Weight(const void*, const void*, int64_t, int64_t,
                                                   std::shared_ptr<const void>) {
  return NotBuilt();
}
absl::StatusOr<Weight> CudaBackend::UploadBlockQuantized(DType, const void*, const void*, int64_t,
                                                         int64_t) {
  return NotBuilt();
}
void CudaBackend::QuantizedMatMul(const float*, int, const Weight&, float*) { Unreachable(); }
absl::StatusOr<std::unique_ptr<PreparedStep>> CudaBackend::Prepare(const StepPlan&) {
  return NotBuilt();
}
void CudaBackend::Embedding(const PreparedStep&, const Weight&, float*) { Unreachable(); }
void CudaBackend::RmsNorm(const float*, const Weight&, int, int, float, float*) { Unreachable(); }
void CudaBackend::MatMul(const float*, int, const Weight&, float*) { Unreachable(); }
void CudaBackend::Rope(const PreparedStep&, float*, int, int, const float*) { Unreachable(); }
void CudaBackend::WriteKv(const PreparedStep&, const float*, const float*, const KvLayout&, void*,
                          void*) {
  Unreachable();
}
void CudaBackend::Attention(const PreparedStep&, const float*, const KvLayout&, const void*,
                            const void*, int, float, float*) {
  Unreachable();
}
void CudaBackend::SiluMul(const float*, const float*, size_t, float*) { Unreachable(); }
void CudaBackend::Add(float*, const float*, size_t) { Unreachable(); }
void CudaBackend::GatherRows(const float*, int, const std::vector<int32_t>&, float*) {
  Unreachable();
}
absl::Status CudaBackend::VerifyAccept(const LogitsView&, absl::Span<const VerifyChain>,
                                       std::vector<VerifyOutcome>*) {
  return NotBuilt();
}
absl::Status CudaBackend::SampleDrafts(const LogitsView&, absl::Span<const DraftRow>,
                                       std::vector<DraftProposal>*) {
  return NotBuilt();
}
absl::Status CudaBackend::MemoryInfo(size_t*, size_t*) { return NotBuilt(); }

}  // namespace tandem
