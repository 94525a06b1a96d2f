// Builds the communicator of one rank from options: picks the backend and sets up the
// rendezvous store the ranks share.
#ifndef TANDEM_COMM_FACTORY_H_
#define TANDEM_COMM_FACTORY_H_

#include <grpcpp/security/credentials.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/store.h"

namespace tandem {

struct CommOptions {
  // "local" (one rank, host memory), "gloo" (CPU, TCP via gloo), "tcp" (CPU, Tandem's
  // own TCP mesh; sleeps while waiting, see comm/tcp_mesh_communicator.h) or "nccl" (GPU).
  std::string backend = "local";
  int rank = 0;
  int size = 1;

  // Rendezvous, needed by gloo and tcp with size > 1 and by nccl: set exactly one of
  //  - store: an existing store (in-process use, tests);
  //  - rendezvous_address: "host:port" of a tandem.v1.Rendezvous server (the
  //    coordinator), with rendezvous_credentials (null = plaintext);
  //  - store_directory: a directory all ranks see (one machine).
  std::shared_ptr<Store> store;
  std::string rendezvous_address;
  std::shared_ptr<grpc::ChannelCredentials> rendezvous_credentials;
  std::string store_directory;
  // Identifies this run of the group; every key is prefixed with it, so a restarted
  // group never reads an earlier run's values. 1..128 characters of [A-Za-z0-9._-];
  // required whenever a store is used.
  std::string run_id;

  // gloo and tcp: address to listen on and publish (see GlooOptions, TcpMeshOptions),
  // or an interface name.
  std::string hostname = "127.0.0.1";
  std::string interface;
  // nccl: CUDA device; -1 = rank % visible devices.
  int cuda_device = -1;

  // Bound on rendezvous and connection setup.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Optional, thread-safe: once it returns true, the calls of a rendezvous_address store
  // (GrpcStore) and the tcp backend's connection setup give up with CANCELLED within a
  // fraction of a second instead of waiting out their budgets (a process shutting down).
  std::function<bool()> cancelled;
};

// Creates and connects this rank's communicator; blocks until the group is connected
// or `connect_timeout` passes. INVALID_ARGUMENT for inconsistent options (unknown
// backend, rank outside [0, size), no or several rendezvous sources, bad run id,
// "local" with size > 1: use LocalGroup for in-process groups); UNIMPLEMENTED for nccl
// in a build without CUDA; otherwise the backend's error.
absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const CommOptions& options);

// The store that `options` describe, scoped to options.run_id (PrefixStore).
absl::StatusOr<std::shared_ptr<Store>> OpenRendezvousStore(const CommOptions& options);

}  // namespace tandem

#endif  // TANDEM_COMM_FACTORY_H_
