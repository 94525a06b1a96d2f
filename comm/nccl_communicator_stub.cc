// The NCCL backend when the build has no CUDA.
#include "comm/nccl_communicator.h"

namespace tandem {

bool NcclCompiledIn() { return false; }

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(int, int, Store&,
                                                                     const NcclOptions&) {
  return absl::UnimplementedError("nccl backend: built without CUDA");
}

}  // namespace tandem
