#include "comm/comm_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, comm_backend, "local",
          "Collective backend of the tensor-parallel group: local (one rank), tcp (CPU, "
          "Tandem's own TCP mesh; sleeps while waiting), gloo (CPU, gloo over TCP; its "
          "transport busy-polls) or nccl (GPU).");
ABSL_FLAG(std::string, comm_hostname, "127.0.0.1",
          "gloo, tcp: address this rank listens on and publishes to its peers (pod IP or DNS "
          "name on a cluster; loopback on one machine).");
ABSL_FLAG(std::string, comm_interface, "",
          "gloo, tcp: network interface to bind (e.g. eth0); overrides --comm_hostname.");
ABSL_FLAG(std::string, comm_rendezvous, "",
          "host:port of the tandem.v1.Rendezvous service (the coordinator) used to find "
          "the other ranks.");
ABSL_FLAG(std::string, comm_store_dir, "",
          "Directory shared by all ranks on one machine, used for rendezvous instead of "
          "--comm_rendezvous.");
ABSL_FLAG(absl::Duration, comm_connect_timeout, absl::Seconds(60),
          "Bound on rendezvous and connection setup of the group.");
ABSL_FLAG(int, comm_cuda_device, -1, "nccl: CUDA device of this rank; -1 = rank % devices.");

namespace tandem {

CommOptions CommOptionsFromFlags() {
  CommOptions options;
  options.backend = absl::GetFlag(FLAGS_comm_backend);
  options.hostname = absl::GetFlag(FLAGS_comm_hostname);
  options.interface = absl::GetFlag(FLAGS_comm_interface);
  options.rendezvous_address = absl::GetFlag(FLAGS_comm_rendezvous);
  options.store_directory = absl::GetFlag(FLAGS_comm_store_dir);
  options.connect_timeout = absl::GetFlag(FLAGS_comm_connect_timeout);
  options.cuda_device = absl::GetFlag(FLAGS_comm_cuda_device);
  return options;
}

}  // namespace tandem
