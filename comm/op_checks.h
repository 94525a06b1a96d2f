// Argument checks shared by the communicator backends, so every backend rejects the
// same bad calls with the same INVALID_ARGUMENT messages before touching a peer.
#ifndef TANDEM_COMM_OP_CHECKS_H_
#define TANDEM_COMM_OP_CHECKS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tandem {

// `op` names the call in messages, e.g. "gloo AllGather (rank 2)".
absl::Status CheckBuffer(const void* data, size_t bytes, absl::string_view op);
absl::Status CheckFloatCount(size_t count, absl::string_view op);
absl::Status CheckRoot(int root, int size, absl::string_view op);
absl::Status CheckTimeout(absl::Duration timeout, absl::string_view op);

}  // namespace tandem

#endif  // TANDEM_COMM_OP_CHECKS_H_
