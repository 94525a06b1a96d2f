// `nccl` backend: GPU collectives between processes, one GPU per rank.
//
// Buffers are CUDA device memory on this rank's device. Each call enqueues on the
// communicator's own stream and returns once the result is in place; inputs must be
// ready when the call is made (synchronise the stream that produced them first).
// AllReduceSum is an ncclAllGather into a scratch buffer followed by a kernel that sums
// in rank order, so its bits match the CPU backends' and never depend on NCCL's
// algorithm choice or message size. Timeouts poll NCCL's async error state; on expiry
// the NCCL communicator is aborted and this communicator is broken (every later call
// fails at once with the first error).
//
// Built without CUDA, CreateNcclCommunicator returns UNIMPLEMENTED.
#ifndef TANDEM_COMM_NCCL_COMMUNICATOR_H_
#define TANDEM_COMM_NCCL_COMMUNICATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/store.h"

namespace tandem {

struct NcclOptions {
  // CUDA device of this rank; -1 = rank % number of visible devices.
  int device = -1;
  // Bound on the unique-id exchange and communicator initialisation.
  absl::Duration connect_timeout = absl::Seconds(60);
};

// True when this binary has the NCCL backend (built with CUDA).
bool NcclCompiledIn();

// Rank 0 creates the NCCL unique id and publishes it in `store` (scoped to this group's
// run, e.g. a PrefixStore with the run id); the other ranks read it from there. Borrows
// `store` only during the call. UNAVAILABLE when there is no usable device,
// DEADLINE_EXCEEDED when the id or the peers do not show up in time.
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(int rank, int size,
                                                                     Store& store,
                                                                     const NcclOptions& options);

}  // namespace tandem

#endif  // TANDEM_COMM_NCCL_COMMUNICATOR_H_
