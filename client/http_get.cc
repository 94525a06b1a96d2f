#include "client/http_get.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tandem::client {
namespace {

// Waits until `fd` is ready for `events` or the deadline passes.
bool WaitReady(int fd, short events, absl::Time deadline) {
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(ms));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace

absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                                    absl::Duration timeout) {
  const std::string url = absl::StrCat("http://", host_port, path);
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", host_port, "' is not host:port"));
  }
  const std::string host = host_port.substr(0, colon);
  const std::string port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &result); rc != 0) {
    return absl::UnavailableError(absl::StrCat(url, ": ", gai_strerror(rc)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* a = result; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      error = strerror(errno);
      close(fd);
      fd = -1;
      continue;
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    if (!WaitReady(fd, POLLOUT, deadline) ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0 || so_error != 0) {
      error = so_error != 0 ? strerror(so_error) : "connect timed out";
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(result);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(url, ": ", error));

  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host_port, "\r\nConnection: close\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    if (!WaitReady(fd, POLLOUT, deadline)) {
      close(fd);
      return absl::DeadlineExceededError(absl::StrCat(url, ": timed out sending"));
    }
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      const std::string e = strerror(errno);
      close(fd);
      return absl::UnavailableError(absl::StrCat(url, ": ", e));
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string response;
  char buffer[16384];
  while (true) {
    if (!WaitReady(fd, POLLIN, deadline)) {
      close(fd);
      return absl::DeadlineExceededError(absl::StrCat(url, ": timed out reading"));
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      const std::string e = strerror(errno);
      close(fd);
      return absl::UnavailableError(absl::StrCat(url, ": ", e));
    }
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  const size_t header_end = response.find("\r\n\r\n");
  const size_t first_space = response.find(' ');
  int status = 0;
  if (header_end == std::string::npos || first_space == std::string::npos ||
      !absl::StartsWith(response, "HTTP/") ||
      !absl::SimpleAtoi(response.substr(first_space + 1, 3), &status)) {
    return absl::DataLossError(absl::StrCat(url, ": not an HTTP response"));
  }
  if (status != 200) {
    return absl::UnavailableError(absl::StrCat(url, ": HTTP status ", status));
  }
  return response.substr(header_end + 4);
}

}  // namespace tandem::client
