// Minimal HTTP/1.0 GET over plain TCP, for scraping /metrics.
#ifndef TANDEM_CLIENT_HTTP_GET_H_
#define TANDEM_CLIENT_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::client {

// GETs http://`host_port``path` (host is an IPv4 address or a name resolvable by
// getaddrinfo) and returns the body of a 200 answer. Other statuses, connection
// failures and a response slower than `timeout` are errors naming the URL.
absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                                    absl::Duration timeout);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_HTTP_GET_H_
