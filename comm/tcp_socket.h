// POSIX TCP helpers of the `tcp` backend: an owning descriptor, the address to listen
// on from a hostname or an interface, and connect / accept / whole-buffer I/O bounded
// by a deadline. Every wait is a poll(2) that sleeps until the socket is ready or the
// deadline passes; nothing spins. Sockets made here are non-blocking, close-on-exec
// and TCP_NODELAY; writes use MSG_NOSIGNAL (a dead peer is an error, never SIGPIPE).
#ifndef TANDEM_COMM_TCP_SOCKET_H_
#define TANDEM_COMM_TCP_SOCKET_H_

#include <sys/socket.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem {

// Owns one file descriptor (-1 = none) and closes it on destruction.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() { reset(); }
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes the current descriptor (if any) and takes `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// An IPv4 or IPv6 socket address.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// The address to listen on: the first address of network interface `interface` when it
// is non-empty (IPv4 preferred over IPv6), else `hostname` resolved (numeric address or
// DNS name; the first result). The port is 0. INVALID_ARGUMENT when neither names a
// usable address.
absl::StatusOr<SocketAddress> ResolveListenAddress(const std::string& hostname,
                                                   const std::string& interface);

// Numeric host of `address` ("10.0.0.5", "::1", "fe80::1%eth0") and its port.
std::string NumericHost(const SocketAddress& address);
int PortOf(const SocketAddress& address);

// A non-blocking listening socket bound to `address` on an ephemeral port; `*bound`
// receives the address actually bound (with its port).
absl::StatusOr<ScopedFd> ListenOnEphemeralPort(const SocketAddress& address, int backlog,
                                               SocketAddress* bound);

// Connects to numeric `host`:`port`, waiting at most until `deadline`.
// UNAVAILABLE when refused or unreachable, DEADLINE_EXCEEDED when not connected in time.
absl::StatusOr<ScopedFd> ConnectBefore(const std::string& host, int port, absl::Time deadline);

// Accepts one connection on `listen_fd` if one is pending (nullopt-like: an invalid
// ScopedFd when none is); never waits. Errors other than "none pending" are UNAVAILABLE.
absl::StatusOr<ScopedFd> AcceptPending(int listen_fd);

// Sends / receives exactly `bytes` on non-blocking socket `fd`, waiting at most until
// `deadline` (DEADLINE_EXCEEDED). UNAVAILABLE when the peer closed or reset the
// connection. `what` names the transfer in messages.
absl::Status SendAllBefore(int fd, const void* data, size_t bytes, absl::Time deadline,
                           const std::string& what);
absl::Status ReceiveAllBefore(int fd, void* data, size_t bytes, absl::Time deadline,
                              const std::string& what);

// Milliseconds to hand poll(2) to wait until `deadline`: rounded up (a poll never wakes
// before the deadline only to poll again with 0), at least 0, at most INT32_MAX; -1
// (wait forever) for absl::InfiniteFuture().
int PollTimeoutMs(absl::Time deadline);

// "strerror(err) (errno err)".
std::string ErrnoText(int err);

}  // namespace tandem

#endif  // TANDEM_COMM_TCP_SOCKET_H_
