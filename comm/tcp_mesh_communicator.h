// `tcp` backend: CPU collectives between processes (one per rank) over Tandem's own
// full mesh of TCP connections.
//
// Why not gloo: gloo's TCP transport runs a device thread that busy-polls, so ranks
// that share a core (several ranks per host, a draft worker beside them, CPU affinity)
// wait a scheduler time slice for each message. This backend does all I/O on the
// caller's thread and sleeps in poll(2) while it waits, so a wake-up costs
// microseconds. No background threads.
//
// Set-up: see comm/tcp_mesh_connect.h (rendezvous through a Store: each rank publishes
// "addr/<rank>", connects to the lower ranks, accepts the higher ones, and checks a
// hello carrying ranks, group size and run id).
//
// Calls (contract of comm/communicator.h, same results as the gloo and local backends):
//  - AllGather: each rank sends its buffer to every peer and receives every peer's.
//  - AllReduceSum: that all-gather, then the local rank-order sum (rank_order_sum.h),
//    so the bits are identical to the other CPU backends' for the same inputs.
//  - Broadcast: the root sends to every peer. Barrier: an all-gather of headers only.
// Every call is bounded by its timeout (DEADLINE_EXCEEDED). A peer that closes or dies
// fails at once (UNAVAILABLE) the call that still exchanges data with it, else the next
// call that does (a call already done with that peer does not watch it). Ranks whose
// calls differ fail with FAILED_PRECONDITION. After any failure the communicator is
// broken: it closes its connections (so its peers fail at once too) and every later call
// returns the first error. Buffers are preallocated and reused: no allocation per call
// in steady state.
#ifndef TANDEM_COMM_TCP_MESH_COMMUNICATOR_H_
#define TANDEM_COMM_TCP_MESH_COMMUNICATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "comm/store.h"
#include "comm/tcp_mesh_connect.h"

namespace tandem {

// Connects rank `rank` of a group of `size` (1 <= size, 0 <= rank < size). `store`
// must be shared by all ranks and scoped to this group's run (e.g. a PrefixStore with
// the run id). Borrows `store` only during the call. Blocks until all ranks have
// connected or options.connect_timeout passes (DEADLINE_EXCEEDED naming the missing
// ranks). A group of one needs no peers and never touches `store`.
absl::StatusOr<std::unique_ptr<Communicator>> CreateTcpMeshCommunicator(
    int rank, int size, Store& store, const TcpMeshOptions& options);

}  // namespace tandem

#endif  // TANDEM_COMM_TCP_MESH_COMMUNICATOR_H_
