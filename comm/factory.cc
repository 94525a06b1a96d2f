#include "comm/factory.h"

#include "absl/strings/str_cat.h"
#include "comm/file_store.h"
#include "comm/gloo_communicator.h"
#include "comm/grpc_store.h"
#include "comm/local_communicator.h"
#include "comm/nccl_communicator.h"
#include "comm/tcp_mesh_communicator.h"

namespace tandem {
namespace {

absl::Status ValidateRunId(const std::string& run_id) {
  if (run_id.empty() || run_id.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("comm: run_id must be 1..128 characters, got ", run_id.size()));
  }
  for (char c : run_id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "comm: run_id '", run_id, "' may only hold letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<Store>> OpenRendezvousStore(const CommOptions& options) {
  const int sources = (options.store != nullptr) + !options.rendezvous_address.empty() +
                      !options.store_directory.empty();
  if (sources != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("comm: set exactly one rendezvous source (store, rendezvous_address or "
                     "store_directory); ",
                     sources, " set"));
  }
  if (absl::Status status = ValidateRunId(options.run_id); !status.ok()) return status;
  std::shared_ptr<Store> base;
  if (options.store != nullptr) {
    base = options.store;
  } else if (!options.rendezvous_address.empty()) {
    auto store = GrpcStore::Connect(options.rendezvous_address, options.rendezvous_credentials,
                                    options.connect_timeout, options.cancelled);
    if (!store.ok()) return store.status();
    base = *std::move(store);
  } else {
    auto store = FileStore::Open(options.store_directory);
    if (!store.ok()) return store.status();
    base = *std::move(store);
  }
  return std::shared_ptr<Store>(std::make_shared<PrefixStore>(std::move(base), options.run_id));
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const CommOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("comm: rank ", options.rank, " is not in a group of size ", options.size));
  }
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("comm: connect_timeout must be positive");
  }
  if (options.backend == "local") {
    if (options.size != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("comm: the local backend across processes supports one rank only, got "
                       "size ",
                       options.size, "; use tcp or gloo, or LocalGroup for in-process ranks"));
    }
    return CreateSingleRankCommunicator();
  }
  if (options.backend == "gloo") {
    GlooOptions gloo;
    gloo.hostname = options.hostname;
    gloo.interface = options.interface;
    gloo.connect_timeout = options.connect_timeout;
    if (options.size == 1) {
      // Nobody to meet: a private store will do.
      InMemoryStore own;
      return CreateGlooCommunicator(0, 1, own, gloo);
    }
    absl::StatusOr<std::shared_ptr<Store>> store = OpenRendezvousStore(options);
    if (!store.ok()) return store.status();
    return CreateGlooCommunicator(options.rank, options.size, **store, gloo);
  }
  if (options.backend == "tcp") {
    TcpMeshOptions tcp;
    tcp.hostname = options.hostname;
    tcp.interface = options.interface;
    tcp.connect_timeout = options.connect_timeout;
    tcp.cancelled = options.cancelled;
    if (options.size == 1) {
      InMemoryStore own;
      return CreateTcpMeshCommunicator(0, 1, own, tcp);
    }
    absl::StatusOr<std::shared_ptr<Store>> store = OpenRendezvousStore(options);
    if (!store.ok()) return store.status();
    tcp.run_id = options.run_id;
    return CreateTcpMeshCommunicator(options.rank, options.size, **store, tcp);
  }
  if (options.backend == "nccl") {
    if (!NcclCompiledIn()) {
      InMemoryStore unused;
      return CreateNcclCommunicator(options.rank, options.size, unused, NcclOptions());
    }
    NcclOptions nccl;
    nccl.device = options.cuda_device;
    nccl.connect_timeout = options.connect_timeout;
    if (options.size == 1 && options.store == nullptr && options.rendezvous_address.empty() &&
        options.store_directory.empty()) {
      InMemoryStore own;
      return CreateNcclCommunicator(0, 1, own, nccl);
    }
    absl::StatusOr<std::shared_ptr<Store>> store = OpenRendezvousStore(options);
    if (!store.ok()) return store.status();
    return CreateNcclCommunicator(options.rank, options.size, **store, nccl);
  }
  return absl::InvalidArgumentError(absl::StrCat("comm: unknown backend '", options.backend,
                                                 "'; expected local, gloo, tcp or nccl"));
}

}  // namespace tandem
