// Command-line flags for the collective layer, shared by the binaries that join a
// target group (--comm_backend, --comm_hostname, --comm_interface,
// --comm_rendezvous, --comm_store_dir, --comm_connect_timeout, --comm_cuda_device).
// Rank, size and run id come from the binary's own flags or from its coordinator.
#ifndef TANDEM_COMM_COMM_FLAGS_H_
#define TANDEM_COMM_COMM_FLAGS_H_

#include "comm/factory.h"

namespace tandem {

// CommOptions filled from the --comm_* flags (rank 0, size 1, no run id).
CommOptions CommOptionsFromFlags();

}  // namespace tandem

#endif  // TANDEM_COMM_COMM_FLAGS_H_
