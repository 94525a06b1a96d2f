// Forms the full TCP mesh of the `tcp` backend: one connection per pair of ranks.
//
// Each rank listens on an ephemeral port of its hostname or interface and publishes
// "addr/<rank>" = "<numeric host> <port> <nonce>" in the group's Store. It then
// connects to every lower rank and accepts one connection from every higher rank. The
// connecting rank opens with a fixed-size hello (magic, protocol version, its rank,
// the rank it means to reach, group size, that rank's published nonce, run id); the
// accepting rank checks every field and answers accepted or refused. A stale address
// (a reused run id whose old listener's port now belongs to someone else) or a peer of
// another run is thus refused instead of joining the wrong group.
#ifndef TANDEM_COMM_TCP_MESH_CONNECT_H_
#define TANDEM_COMM_TCP_MESH_CONNECT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/store.h"
#include "comm/tcp_socket.h"

namespace tandem {

struct TcpMeshOptions {
  // Address this rank listens on and publishes to its peers: a hostname or IP
  // ("127.0.0.1" for one machine; a pod IP or DNS name on a cluster). Ignored when
  // `interface` is set.
  std::string hostname = "127.0.0.1";
  // Network interface whose address to listen on (e.g. "eth0"); empty = `hostname`.
  std::string interface;
  // Bound on the whole rendezvous and connection setup.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Names the run in the hello; all ranks of a group must pass the same value (0..128
  // bytes; the factory passes its run id).
  std::string run_id;
  // Optional, thread-safe: once it returns true, waiting for the higher ranks to connect
  // gives up with CANCELLED (checked every 100 ms). Store waits are the store's own.
  std::function<bool()> cancelled;
};

inline constexpr size_t kMaxTcpRunIdBytes = 128;

// Connects rank `rank` of `size` to every other rank through `store` (shared by all
// ranks and scoped to this run). Returns size() sockets, element r connected to rank r
// (element `rank` is empty); they are non-blocking, TCP_NODELAY. Borrows `store` during
// the call. INVALID_ARGUMENT for bad arguments or an address that cannot be listened
// on; DEADLINE_EXCEEDED (naming the missing ranks) when the mesh is not complete within
// options.connect_timeout; UNAVAILABLE when a peer refuses or cannot be reached.
absl::StatusOr<std::vector<ScopedFd>> ConnectTcpMesh(int rank, int size, Store& store,
                                                     const TcpMeshOptions& options);

}  // namespace tandem

#endif  // TANDEM_COMM_TCP_MESH_CONNECT_H_
