#include "comm/tcp_exchange.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tandem {
namespace {

constexpr unsigned char kHeaderVersion = 1;

const char* KindName(unsigned kind) {
  switch (kind) {
    case 1:
      return "AllGather";
    case 2:
      return "AllReduceSum";
    case 3:
      return "Broadcast";
    case 4:
      return "Barrier";
    default:
      return "an unknown call";
  }
}

uint32_t GetU32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

uint64_t GetU64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// The iovec of what is left of a header + payload transfer; returns the entry count.
int Remaining(unsigned char* header, char* data, size_t bytes, size_t done, iovec* iov) {
  const size_t header_bytes = TcpExchange::kHeaderBytes;
  if (done >= header_bytes) {
    iov[0] = {data + (done - header_bytes), bytes - (done - header_bytes)};
    return 1;
  }
  iov[0] = {header + done, header_bytes - done};
  if (bytes == 0) return 1;
  iov[1] = {data, bytes};
  return 2;
}

}  // namespace

TcpExchange::TcpExchange(int rank, std::vector<ScopedFd> peers) : rank_(rank) {
  peers_.resize(peers.size());
  for (size_t p = 0; p < peers.size(); ++p) peers_[p].fd = std::move(peers[p]);
  poll_fds_.reserve(peers_.size());
  poll_peers_.reserve(peers_.size());
}

void TcpExchange::EncodeHeader(size_t bytes, unsigned char* out) const {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<unsigned char>(call_ >> (8 * i));
  out[4] = static_cast<unsigned char>(kind_);
  out[5] = kHeaderVersion;
  out[6] = out[7] = 0;
  const uint64_t length = bytes;
  for (int i = 0; i < 8; ++i) out[8 + i] = static_cast<unsigned char>(length >> (8 * i));
}

void TcpExchange::Begin(Kind kind) {
  ++call_;
  kind_ = kind;
  active_ = 0;
  started_ = absl::Now();
  for (Peer& p : peers_) p.out.active = p.in.active = false;
}

void TcpExchange::Send(int peer, const void* data, size_t bytes) {
  Transfer& t = peers_[peer].out;
  t.active = true;
  // Only read through this pointer; it shares the Transfer type with receives.
  t.data = static_cast<char*>(const_cast<void*>(data));
  t.bytes = bytes;
  t.done = 0;
  EncodeHeader(bytes, t.header);
  ++active_;
}

void TcpExchange::Receive(int peer, void* data, size_t bytes) {
  Transfer& t = peers_[peer].in;
  t.active = true;
  t.data = static_cast<char*>(data);
  t.bytes = bytes;
  t.done = 0;
  ++active_;
}

absl::Status TcpExchange::PushOut(int peer, absl::string_view op) {
  Transfer& t = peers_[peer].out;
  const size_t total = kHeaderBytes + t.bytes;
  while (t.done < total) {
    iovec iov[2];
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = Remaining(t.header, t.data, t.bytes, t.done, iov);
    ssize_t n = sendmsg(peers_[peer].fd.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      t.done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(op, ": sending to rank ", peer, ": ",
                                               ErrnoText(errno),
                                               " (that rank exited or its communicator failed)"));
  }
  t.active = false;
  --active_;
  return absl::OkStatus();
}

absl::Status TcpExchange::PullIn(int peer, absl::string_view op) {
  Transfer& t = peers_[peer].in;
  const size_t total = kHeaderBytes + t.bytes;
  while (t.done < total) {
    iovec iov[2];
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = Remaining(t.header, t.data, t.bytes, t.done, iov);
    ssize_t n = recvmsg(peers_[peer].fd.get(), &message, MSG_DONTWAIT);
    if (n > 0) {
      const bool had_header = t.done >= kHeaderBytes;
      t.done += static_cast<size_t>(n);
      if (!had_header && t.done >= kHeaderBytes) {
        if (absl::Status s = CheckHeader(peer, op); !s.ok()) return s;
      }
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat(
          op, ": rank ", peer, " closed its connection (it exited or its communicator failed) ",
          "after ", t.done, " of ", total, " bytes of call ", call_));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return absl::OkStatus();
    return absl::UnavailableError(
        absl::StrCat(op, ": receiving from rank ", peer, ": ", ErrnoText(errno)));
  }
  t.active = false;
  --active_;
  return absl::OkStatus();
}

absl::Status TcpExchange::CheckHeader(int peer, absl::string_view op) const {
  const Transfer& t = peers_[peer].in;
  const uint32_t call = GetU32(t.header);
  const unsigned kind = t.header[4];
  const uint64_t bytes = GetU64(t.header + 8);
  if (call == call_ && kind == static_cast<unsigned>(kind_) && bytes == t.bytes &&
      t.header[5] == kHeaderVersion) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat(op, ": rank ", peer, " sent ", KindName(kind), " of ", bytes, " bytes as call ",
                   call, " (header version ", t.header[5], ") while this rank is in ",
                   KindName(static_cast<unsigned>(kind_)), " of ", t.bytes, " bytes as call ",
                   call_, "; the ranks issued different sequences of collective calls"));
}

absl::Status TcpExchange::TimeoutError(absl::Time deadline, absl::string_view op) const {
  std::string waiting;
  for (size_t p = 0; p < peers_.size(); ++p) {
    const Transfer& in = peers_[p].in;
    const Transfer& out = peers_[p].out;
    if (in.active) {
      absl::StrAppend(&waiting, waiting.empty() ? "" : ", ", "rank ", p, " (received ", in.done,
                      " of ", kHeaderBytes + in.bytes, " bytes)");
    }
    if (out.active) {
      absl::StrAppend(&waiting, waiting.empty() ? "" : ", ", "rank ", p, " (took ", out.done,
                      " of ", kHeaderBytes + out.bytes, " bytes)");
    }
  }
  return absl::DeadlineExceededError(absl::StrCat(
      op, ": timed out after ", absl::FormatDuration(deadline - started_), " in call ", call_,
      " waiting for ", waiting, " (that rank is stalled, slow, or did not make this call)"));
}

absl::Status TcpExchange::Fail(absl::Status status) {
  CloseAll();
  return status;
}

void TcpExchange::CloseAll() {
  if (closed_) return;
  closed_ = true;
  for (Peer& p : peers_) {
    if (p.fd.valid()) shutdown(p.fd.get(), SHUT_RDWR);
    p.fd.reset();
  }
}

absl::Status TcpExchange::Run(absl::Time deadline, absl::string_view op) {
  if (closed_ && active_ > 0) {
    return absl::UnavailableError(absl::StrCat(op, ": connections closed after a failure"));
  }
  // Eager pass: most messages fit in the socket buffers, so one pass sends them all.
  for (int p = 0; p < size(); ++p) {
    if (!peers_[p].out.active) continue;
    if (absl::Status s = PushOut(p, op); !s.ok()) return Fail(std::move(s));
  }
  while (active_ > 0) {
    poll_fds_.clear();
    poll_peers_.clear();
    for (int p = 0; p < size(); ++p) {
      const short events = static_cast<short>((peers_[p].out.active ? POLLOUT : 0) |
                                              (peers_[p].in.active ? POLLIN : 0));
      if (events == 0) continue;
      poll_fds_.push_back(pollfd{peers_[p].fd.get(), events, 0});
      poll_peers_.push_back(p);
    }
    const int n = poll(poll_fds_.data(), poll_fds_.size(), PollTimeoutMs(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Fail(absl::UnavailableError(absl::StrCat(op, ": poll: ", ErrnoText(errno))));
    }
    if (n == 0) {
      if (absl::Now() >= deadline) return Fail(TimeoutError(deadline, op));
      continue;
    }
    for (size_t i = 0; i < poll_fds_.size(); ++i) {
      const short revents = poll_fds_[i].revents;
      if (revents == 0) continue;
      const int p = poll_peers_[i];
      if (revents & POLLNVAL) {
        return Fail(absl::InternalError(
            absl::StrCat(op, ": the connection to rank ", p, " is not an open socket")));
      }
      Peer& peer = peers_[p];
      const size_t before = peer.in.done + peer.out.done;
      const bool error = (revents & (POLLHUP | POLLERR)) != 0;
      if (peer.in.active && (error || (revents & POLLIN))) {
        if (absl::Status s = PullIn(p, op); !s.ok()) return Fail(std::move(s));
      }
      if (peer.out.active && (error || (revents & POLLOUT))) {
        if (absl::Status s = PushOut(p, op); !s.ok()) return Fail(std::move(s));
      }
      const bool still_active = peer.in.active || peer.out.active;
      if (error && still_active && peer.in.done + peer.out.done == before) {
        return Fail(absl::UnavailableError(
            absl::StrCat(op, ": the connection to rank ", p, " hung up or failed")));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem
