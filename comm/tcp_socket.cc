#include "comm/tcp_socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tandem {
namespace {

absl::Status SetSocketOptions(int fd, bool tcp) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return absl::InternalError(
        absl::StrCat("cannot make a socket non-blocking: ", ErrnoText(errno)));
  }
  if (tcp) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
      return absl::InternalError(absl::StrCat("cannot set TCP_NODELAY: ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

// Waits until `fd` reports one of `events` (or an error / hang-up) or `deadline`
// passes. Returns the revents, or 0 on timeout; -1 with errno on poll failure.
int WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, PollTimeoutMs(deadline));
    if (n > 0) return p.revents;
    if (n < 0 && errno != EINTR) return -1;
    if (n == 0 && absl::Now() >= deadline) return 0;
  }
}

absl::StatusOr<SocketAddress> InterfaceAddress(const std::string& interface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot list network interfaces: ", ErrnoText(errno)));
  }
  SocketAddress found;
  for (int want : {AF_INET, AF_INET6}) {
    for (ifaddrs* a = list; a != nullptr && found.length == 0; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || interface != a->ifa_name || a->ifa_addr->sa_family != want) {
        continue;
      }
      found.length = want == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      std::memcpy(&found.storage, a->ifa_addr, found.length);
    }
    if (found.length != 0) break;
  }
  freeifaddrs(list);
  if (found.length == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("network interface '", interface, "' does not exist or has no address"));
  }
  return found;
}

}  // namespace

void ScopedFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

std::string ErrnoText(int err) { return absl::StrCat(std::strerror(err), " (errno ", err, ")"); }

int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  const absl::Duration max = absl::Milliseconds(INT_MAX);
  if (left >= max) return INT_MAX;
  return static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))));
}

absl::StatusOr<SocketAddress> ResolveListenAddress(const std::string& hostname,
                                                   const std::string& interface) {
  if (!interface.empty()) return InterfaceAddress(interface);
  if (hostname.empty()) {
    return absl::InvalidArgumentError("set a hostname or an interface to listen on");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  int err = getaddrinfo(hostname.c_str(), nullptr, &hints, &results);
  if (err != 0 || results == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve host '", hostname, "': ", gai_strerror(err)));
  }
  SocketAddress address;
  address.length = results->ai_addrlen;
  std::memcpy(&address.storage, results->ai_addr, results->ai_addrlen);
  freeaddrinfo(results);
  return address;
}

std::string NumericHost(const SocketAddress& address) {
  char host[NI_MAXHOST] = {0};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address.storage), address.length, host,
                  sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) {
    return "?";
  }
  return host;
}

int PortOf(const SocketAddress& address) {
  if (address.storage.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&address.storage)->sin_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&address.storage)->sin6_port);
}

absl::StatusOr<ScopedFd> ListenOnEphemeralPort(const SocketAddress& address, int backlog,
                                               SocketAddress* bound) {
  const std::string where = absl::StrCat("listening on ", NumericHost(address));
  ScopedFd fd(socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return absl::UnavailableError(absl::StrCat(where, ": socket: ", ErrnoText(errno)));
  }
  SocketAddress any_port = address;
  if (any_port.storage.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&any_port.storage)->sin_port = 0;
  } else {
    reinterpret_cast<sockaddr_in6*>(&any_port.storage)->sin6_port = 0;
  }
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&any_port.storage), any_port.length) != 0) {
    // Typically an address that is not this host's: a configuration error.
    return absl::InvalidArgumentError(absl::StrCat(where, ": bind: ", ErrnoText(errno)));
  }
  if (listen(fd.get(), backlog) != 0) {
    return absl::UnavailableError(absl::StrCat(where, ": listen: ", ErrnoText(errno)));
  }
  if (absl::Status s = SetSocketOptions(fd.get(), /*tcp=*/false); !s.ok()) return s;
  bound->length = sizeof(bound->storage);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound->storage), &bound->length) != 0) {
    return absl::UnavailableError(absl::StrCat(where, ": getsockname: ", ErrnoText(errno)));
  }
  return fd;
}

absl::StatusOr<ScopedFd> ConnectBefore(const std::string& host, int port, absl::Time deadline) {
  const std::string where = absl::StrCat("connecting to ", host, " port ", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* results = nullptr;
  const std::string service = absl::StrCat(port);
  int err = getaddrinfo(host.c_str(), service.c_str(), &hints, &results);
  if (err != 0 || results == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": bad address: ", gai_strerror(err)));
  }
  ScopedFd fd(socket(results->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    freeaddrinfo(results);
    return absl::UnavailableError(absl::StrCat(where, ": socket: ", ErrnoText(errno)));
  }
  absl::Status options = SetSocketOptions(fd.get(), /*tcp=*/true);
  int rc = options.ok() ? connect(fd.get(), results->ai_addr, results->ai_addrlen) : 0;
  const int connect_errno = errno;
  freeaddrinfo(results);
  if (!options.ok()) return options;
  if (rc != 0 && connect_errno != EINPROGRESS && connect_errno != EINTR) {
    return absl::UnavailableError(absl::StrCat(where, ": ", ErrnoText(connect_errno)));
  }
  if (rc != 0) {
    int revents = WaitFor(fd.get(), POLLOUT, deadline);
    if (revents == 0) {
      return absl::DeadlineExceededError(absl::StrCat(where, ": timed out"));
    }
    if (revents < 0) {
      return absl::UnavailableError(absl::StrCat(where, ": poll: ", ErrnoText(errno)));
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
    if (so_error != 0) {
      return absl::UnavailableError(absl::StrCat(where, ": ", ErrnoText(so_error)));
    }
  }
  return fd;
}

absl::StatusOr<ScopedFd> AcceptPending(int listen_fd) {
  while (true) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      ScopedFd owned(fd);
      if (absl::Status s = SetSocketOptions(fd, /*tcp=*/true); !s.ok()) return s;
      return owned;
    }
    if (errno == EINTR) continue;
    // A connection that was reset before we took it is not our failure.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) return ScopedFd();
    return absl::UnavailableError(absl::StrCat("accept: ", ErrnoText(errno)));
  }
}

absl::Status SendAllBefore(int fd, const void* data, size_t bytes, absl::Time deadline,
                           const std::string& what) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = send(fd, p + done, bytes - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat(what, ": ", ErrnoText(errno)));
    }
    int revents = WaitFor(fd, POLLOUT, deadline);
    if (revents == 0) return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
    if (revents < 0) {
      return absl::UnavailableError(absl::StrCat(what, ": poll: ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status ReceiveAllBefore(int fd, void* data, size_t bytes, absl::Time deadline,
                              const std::string& what) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = recv(fd, p + done, bytes - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat(what, ": the peer closed the connection after ",
                                                 done, " of ", bytes, " bytes"));
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat(what, ": ", ErrnoText(errno)));
    }
    int revents = WaitFor(fd, POLLIN, deadline);
    if (revents == 0) return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
    if (revents < 0) {
      return absl::UnavailableError(absl::StrCat(what, ": poll: ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem
