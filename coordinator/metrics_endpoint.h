// The address helpers of the coordinator's Prometheus endpoint (coordinator/metrics.h):
// parsing its listen address and reaching it locally.
#ifndef TANDEM_COORDINATOR_METRICS_ENDPOINT_H_
#define TANDEM_COORDINATOR_METRICS_ENDPOINT_H_

#include <string>

#include "absl/status/statusor.h"

namespace tandem::coordinator {

// The port of a "host:port" listen address, in [0, 65535] (0 = pick a free one);
// INVALID_ARGUMENT naming the address otherwise.
absl::StatusOr<int> ParseMetricsPort(const std::string& address);

// The host a local client reaches the listener of `address` ("host:port") on: the
// address's host without brackets, or loopback for a wildcard ("", 0.0.0.0, ::).
std::string LocalHostOf(const std::string& address);

// Opens and closes one TCP connection to host:port (best effort, errors ignored): wakes
// a listener blocked in accept.
void KnockOnce(const std::string& host, int port);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_METRICS_ENDPOINT_H_
