// Collective communication between the ranks of a tensor-parallel group.
//
// Backends: `local` (in-process ranks, and tp = 1), `tcp` (CPU, Tandem's own TCP mesh),
// `gloo` (CPU, TCP via gloo), `nccl` (GPU). Buffers are host memory for local, tcp and
// gloo; for nccl, device memory (the model's activations), or host memory for
// Broadcast and AllGather (staged through a device buffer: the group's step messages).
// Every call has a timeout and returns a status (DEADLINE_EXCEEDED or UNAVAILABLE when
// a peer is gone); none blocks forever. All ranks must issue the same sequence of
// calls with the same sizes.
//
// A Communicator is used by one thread at a time. Bad arguments (null buffer, root
// outside the group, negative timeout) fail with INVALID_ARGUMENT before any peer is
// involved and leave the communicator usable. Any other failure leaves the group out of
// step: the communicator is then broken and every later call fails at once with that
// first error; rebuild the group (new run id, see comm/factory.h) to recover.
#ifndef TANDEM_COMM_COMMUNICATOR_H_
#define TANDEM_COMM_COMMUNICATOR_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tandem {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "local", "tcp", "gloo" or "nccl".
  virtual std::string backend() const = 0;

  // In-place elementwise sum over ranks of `count` floats. Deterministic: element e is
  // always ((x0[e] + x1[e]) + x2[e]) + ... in rank order, independent of `count` and
  // of how the backend chunks messages, so results are bitwise reproducible and the
  // same for a row whether it is reduced alone or inside a larger batch.
  virtual absl::Status AllReduceSum(float* data, size_t count, absl::Duration timeout) = 0;

  // Gathers `bytes` from every rank: out[r * bytes .. (r + 1) * bytes) = rank r's input.
  // `out` holds size() * bytes.
  virtual absl::Status AllGather(const void* in, void* out, size_t bytes,
                                 absl::Duration timeout) = 0;

  // Copies `bytes` at `data` on rank `root` to `data` on every rank.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root, absl::Duration timeout) = 0;

  virtual absl::Status Barrier(absl::Duration timeout) = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMM_COMMUNICATOR_H_
