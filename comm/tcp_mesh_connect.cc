#include "comm/tcp_mesh_connect.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace tandem {
namespace {

constexpr char kHelloMagic[8] = {'T', 'N', 'D', 'M', 'T', 'C', 'P', 'H'};
constexpr char kReplyMagic[8] = {'T', 'N', 'D', 'M', 'T', 'C', 'P', 'R'};
constexpr uint32_t kProtocolVersion = 1;
// magic, version, from, to, size, nonce, run id length, run id (zero padded).
constexpr size_t kHelloBytes = 8 + 4 * 4 + 8 + 4 + kMaxTcpRunIdBytes;
// magic, rank of the answering side, verdict.
constexpr size_t kReplyBytes = 8 + 4 + 4;

enum Verdict : uint32_t {
  kAccepted = 0,
  kNotTandem = 1,  // wrong magic or protocol version
  kWrongGroupSize = 2,
  kStaleAddress = 3,  // meant for another rank or another listener (nonce)
  kWrongRunId = 4,
  kUnexpectedRank = 5,  // not a higher rank, or already connected
};

const char* VerdictText(uint32_t verdict) {
  switch (verdict) {
    case kAccepted:
      return "accepted";
    case kNotTandem:
      return "not a tandem tcp hello of this protocol version";
    case kWrongGroupSize:
      return "group sizes differ";
    case kStaleAddress:
      return "stale address: the listener there is not the one published";
    case kWrongRunId:
      return "run ids differ";
    case kUnexpectedRank:
      return "the sender is not an expected higher rank";
    default:
      return "unknown verdict";
  }
}

void PutU32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void PutU64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
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

struct Hello {
  uint32_t version = kProtocolVersion;
  uint32_t from = 0, to = 0, size = 0;
  uint64_t nonce = 0;
  std::string run_id;
  bool magic_ok = true;
};

void EncodeHello(const Hello& h, unsigned char* out) {
  std::memset(out, 0, kHelloBytes);
  std::memcpy(out, kHelloMagic, 8);
  PutU32(out + 8, h.version);
  PutU32(out + 12, h.from);
  PutU32(out + 16, h.to);
  PutU32(out + 20, h.size);
  PutU64(out + 24, h.nonce);
  PutU32(out + 32, static_cast<uint32_t>(h.run_id.size()));
  std::memcpy(out + 36, h.run_id.data(), h.run_id.size());
}

Hello DecodeHello(const unsigned char* in) {
  Hello h;
  h.magic_ok = std::memcmp(in, kHelloMagic, 8) == 0;
  h.version = GetU32(in + 8);
  h.from = GetU32(in + 12);
  h.to = GetU32(in + 16);
  h.size = GetU32(in + 20);
  h.nonce = GetU64(in + 24);
  const uint32_t length = std::min<uint32_t>(GetU32(in + 32), kMaxTcpRunIdBytes);
  h.run_id.assign(reinterpret_cast<const char*>(in + 36), length);
  return h;
}

struct PublishedAddress {
  std::string host;
  int port = 0;
  uint64_t nonce = 0;
};

absl::StatusOr<PublishedAddress> ParseAddress(const std::string& value, int rank) {
  std::vector<std::string> parts = absl::StrSplit(value, ' ');
  PublishedAddress a;
  if (parts.size() != 3 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &a.port) ||
      a.port <= 0 || a.port > 65535 || !absl::SimpleHexAtoi(parts[2], &a.nonce)) {
    return absl::DataLossError(absl::StrCat("rendezvous key addr/", rank, " holds '", value,
                                            "', not '<host> <port> <nonce>'"));
  }
  a.host = parts[0];
  return a;
}

// Connects to each lower rank and says hello; then collects every answer.
absl::Status ConnectToLowerRanks(int rank, int size, Store& store, const TcpMeshOptions& options,
                                 absl::Time deadline, const std::string& where,
                                 std::vector<ScopedFd>* peers) {
  for (int first = 0; first < rank; first += static_cast<int>(kMaxStoreKeysPerGet)) {
    const int last = std::min(rank, first + static_cast<int>(kMaxStoreKeysPerGet));
    std::vector<std::string> keys;
    for (int p = first; p < last; ++p) keys.push_back(absl::StrCat("addr/", p));
    absl::StatusOr<std::vector<std::string>> values =
        store.Get(keys, std::max(absl::ZeroDuration(), deadline - absl::Now()));
    if (!values.ok()) {
      return absl::Status(values.status().code(),
                          absl::StrCat(where, ": waiting for the addresses of ranks ", first, "..",
                                       last - 1, ": ", values.status().message()));
    }
    for (int p = first; p < last; ++p) {
      absl::StatusOr<PublishedAddress> address = ParseAddress((*values)[p - first], p);
      if (!address.ok()) return address.status();
      const std::string what =
          absl::StrCat(where, ": rank ", p, " at ", address->host, " port ", address->port);
      absl::StatusOr<ScopedFd> fd = ConnectBefore(address->host, address->port, deadline);
      if (!fd.ok()) {
        return absl::Status(fd.status().code(),
                            absl::StrCat(what, ": ", fd.status().message(),
                                         " (is that rank down, or was the run id reused?)"));
      }
      Hello hello;
      hello.from = static_cast<uint32_t>(rank);
      hello.to = static_cast<uint32_t>(p);
      hello.size = static_cast<uint32_t>(size);
      hello.nonce = address->nonce;
      hello.run_id = options.run_id;
      unsigned char bytes[kHelloBytes];
      EncodeHello(hello, bytes);
      if (absl::Status s = SendAllBefore(fd->get(), bytes, kHelloBytes, deadline,
                                         absl::StrCat(what, ": sending hello"));
          !s.ok()) {
        return s;
      }
      (*peers)[p] = *std::move(fd);
    }
  }
  for (int p = 0; p < rank; ++p) {
    unsigned char reply[kReplyBytes];
    const std::string what = absl::StrCat(where, ": answer of rank ", p);
    if (absl::Status s = ReceiveAllBefore((*peers)[p].get(), reply, kReplyBytes, deadline, what);
        !s.ok()) {
      return s;
    }
    const uint32_t verdict = GetU32(reply + 12);
    if (std::memcmp(reply, kReplyMagic, 8) != 0 || GetU32(reply + 8) != static_cast<uint32_t>(p)) {
      return absl::UnavailableError(absl::StrCat(what, ": not a tandem tcp answer"));
    }
    if (verdict != kAccepted) {
      return absl::UnavailableError(absl::StrCat(what, ": refused: ", VerdictText(verdict)));
    }
  }
  return absl::OkStatus();
}

// A connection accepted but whose hello is not complete yet.
struct PendingHello {
  ScopedFd fd;
  unsigned char bytes[kHelloBytes];
  size_t received = 0;
};

uint32_t Judge(const Hello& h, int rank, int size, uint64_t nonce, const std::string& run_id,
               const std::vector<ScopedFd>& peers) {
  if (!h.magic_ok || h.version != kProtocolVersion) return kNotTandem;
  if (h.size != static_cast<uint32_t>(size)) return kWrongGroupSize;
  if (h.to != static_cast<uint32_t>(rank) || h.nonce != nonce) return kStaleAddress;
  if (h.run_id != run_id) return kWrongRunId;
  if (h.from <= static_cast<uint32_t>(rank) || h.from >= static_cast<uint32_t>(size) ||
      peers[h.from].valid()) {
    return kUnexpectedRank;
  }
  return kAccepted;
}

// Accepts until every higher rank has said an acceptable hello.
absl::Status AcceptHigherRanks(int rank, int size, int listen_fd, uint64_t nonce,
                               const TcpMeshOptions& options, absl::Time deadline,
                               const std::string& where, std::vector<ScopedFd>* peers) {
  int missing = size - 1 - rank;
  std::vector<PendingHello> pending;
  std::vector<pollfd> fds;
  std::string last_refusal;
  while (missing > 0) {
    fds.assign(1, pollfd{listen_fd, POLLIN, 0});
    for (const PendingHello& h : pending) fds.push_back(pollfd{h.fd.get(), POLLIN, 0});
    int timeout_ms = PollTimeoutMs(deadline);
    if (options.cancelled && (timeout_ms < 0 || timeout_ms > 100)) timeout_ms = 100;
    int n = poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat(where, ": poll: ", ErrnoText(errno)));
    }
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError(
          absl::StrCat(where, ": cancelled while waiting for the higher ranks to connect"));
    }
    if (n <= 0) {
      if (absl::Now() < deadline) continue;
      std::vector<int> absent;
      for (int p = rank + 1; p < size; ++p) {
        if (!(*peers)[p].valid()) absent.push_back(p);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          where, ": timed out waiting for rank(s) ", absl::StrJoin(absent, ", "), " to connect",
          last_refusal.empty() ? "" : "; refused a connection: ", last_refusal));
    }
    // Read hellos first (indices shift when a pending entry is dropped).
    for (size_t i = pending.size(); i-- > 0;) {
      if (fds[i + 1].revents == 0) continue;
      PendingHello& h = pending[i];
      ssize_t got = recv(h.fd.get(), h.bytes + h.received, kHelloBytes - h.received, 0);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (got <= 0) {  // closed or reset before saying hello: not one of ours
        pending.erase(pending.begin() + static_cast<long>(i));
        continue;
      }
      h.received += static_cast<size_t>(got);
      if (h.received < kHelloBytes) continue;
      const Hello hello = DecodeHello(h.bytes);
      const uint32_t verdict = Judge(hello, rank, size, nonce, options.run_id, *peers);
      unsigned char reply[kReplyBytes];
      std::memcpy(reply, kReplyMagic, 8);
      PutU32(reply + 8, static_cast<uint32_t>(rank));
      PutU32(reply + 12, verdict);
      absl::Status sent = SendAllBefore(h.fd.get(), reply, kReplyBytes, deadline,
                                        absl::StrCat(where, ": answering a hello"));
      if (verdict == kAccepted && sent.ok()) {
        (*peers)[hello.from] = std::move(h.fd);
        --missing;
      } else if (verdict != kAccepted) {
        last_refusal = absl::StrCat("hello from rank ", hello.from, " of run '", hello.run_id,
                                    "': ", VerdictText(verdict));
      }
      pending.erase(pending.begin() + static_cast<long>(i));
    }
    if (fds[0].revents != 0) {
      while (true) {
        absl::StatusOr<ScopedFd> accepted = AcceptPending(listen_fd);
        if (!accepted.ok()) {
          return absl::Status(accepted.status().code(),
                              absl::StrCat(where, ": ", accepted.status().message()));
        }
        if (!accepted->valid()) break;
        pending.emplace_back();
        pending.back().fd = *std::move(accepted);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ScopedFd>> ConnectTcpMesh(int rank, int size, Store& store,
                                                     const TcpMeshOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp: rank ", rank, " is not in a group of size ", size));
  }
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("tcp: connect_timeout must be positive");
  }
  if (options.run_id.size() > kMaxTcpRunIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("tcp: run id of ", options.run_id.size(),
                                                   " bytes; at most ", kMaxTcpRunIdBytes));
  }
  const std::string where = absl::StrCat("tcp rank ", rank, " of ", size);
  std::vector<ScopedFd> peers(static_cast<size_t>(size));
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  // Resolved even for a group of one, so a bad address fails the same way at any size.
  absl::StatusOr<SocketAddress> address = ResolveListenAddress(options.hostname, options.interface);
  if (!address.ok()) {
    return absl::Status(address.status().code(),
                        absl::StrCat(where, ": ", address.status().message()));
  }
  if (size == 1) return peers;
  SocketAddress bound;
  absl::StatusOr<ScopedFd> listener = ListenOnEphemeralPort(*address, size + 16, &bound);
  if (!listener.ok()) {
    return absl::Status(listener.status().code(),
                        absl::StrCat(where, ": ", listener.status().message()));
  }
  absl::BitGen random;
  const uint64_t nonce = absl::Uniform<uint64_t>(random);
  const std::string published =
      absl::StrCat(NumericHost(bound), " ", PortOf(bound), " ", absl::Hex(nonce));
  if (absl::Status s = store.Set(absl::StrCat("addr/", rank), published); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(where, ": publishing the address: ", s.message()));
  }
  if (absl::Status s = ConnectToLowerRanks(rank, size, store, options, deadline, where, &peers);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          AcceptHigherRanks(rank, size, listener->get(), nonce, options, deadline, where, &peers);
      !s.ok()) {
    return s;
  }
  return peers;
}

}  // namespace tandem
