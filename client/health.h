// grpc.health.v1 checks of a server as a whole (service "").
#ifndef TANDEM_CLIENT_HEALTH_H_
#define TANDEM_CLIENT_HEALTH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tandem::client {

// OK when the server at `address` (host:port) answers SERVING within `timeout`;
// otherwise UNAVAILABLE with what it answered (NOT_SERVING, connection refused, ...).
absl::Status CheckServing(const std::string& address, absl::Duration timeout);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_HEALTH_H_
