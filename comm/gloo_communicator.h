// `gloo` backend: CPU collectives over TCP between processes (one per rank).
//
// Ranks rendezvous through a tandem Store (file, gRPC or in-memory): each publishes its
// TCP listening addresses and connects a full mesh. AllReduceSum is an all-gather of
// every rank's buffer followed by a local sum in rank order, so its bits never depend
// on message size or chunking. Every call is bounded by its timeout; gloo exceptions
// become DEADLINE_EXCEEDED (timed out) or UNAVAILABLE (peer gone, I/O error). After a
// failed call the communicator is broken (a collective that failed half-way leaves the
// peers out of step), and every later call fails at once with the first error; build
// a new group (new run id) to recover.
#ifndef TANDEM_COMM_GLOO_COMMUNICATOR_H_
#define TANDEM_COMM_GLOO_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/store.h"

namespace tandem {

struct GlooOptions {
  // Address this rank listens on and publishes to its peers: a hostname or IP
  // ("127.0.0.1" for one machine; a pod IP or DNS name on a cluster). Ignored when
  // `interface` is set.
  std::string hostname = "127.0.0.1";
  // Network interface to bind (e.g. "eth0"); empty = use `hostname`.
  std::string interface;
  // Bound on the whole rendezvous and connection setup.
  absl::Duration connect_timeout = absl::Seconds(60);
};

// Connects rank `rank` of a group of `size` (1 <= size, 0 <= rank < size). `store` must
// be shared by all ranks and scoped to this group's run (e.g. a PrefixStore with the run
// id): stale keys from an earlier run would make ranks connect to dead addresses.
// Borrows `store` only during the call. Blocks until all ranks have connected or
// `connect_timeout` passes (DEADLINE_EXCEEDED naming what is missing).
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(int rank, int size,
                                                                     Store& store,
                                                                     const GlooOptions& options);

}  // namespace tandem

#endif  // TANDEM_COMM_GLOO_COMMUNICATOR_H_
