// Picking unused TCP ports for local listeners.
#ifndef TANDEM_CLIENT_FREE_PORT_H_
#define TANDEM_CLIENT_FREE_PORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::client {

// `count` distinct TCP ports that were free on `host` (an IPv4 address) a moment ago:
// each is bound with port 0 and released. Another process may still take one before it
// is used; callers report bind failures of their children as usual.
absl::StatusOr<std::vector<int>> FreePorts(const std::string& host, int count);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_FREE_PORT_H_
