// The message engine of the `tcp` backend: moves the messages of one collective call
// between this rank and its peers over the full mesh (comm/tcp_mesh_connect.h).
//
// A call plans at most one outgoing and one incoming message per peer (Send, Receive),
// then Run() moves them all at once: non-blocking sockets, sends and receives
// interleaved, and poll(2) sleeping whenever nothing can move, so neither large
// messages (both sides sending at once) nor oversubscribed cores (a waiting rank must
// not burn the time slice of the rank it waits for) are a problem.
//
// Every message starts with a 16-byte header: call number (counted by both sides),
// kind of call, payload length. The receiver checks it, so ranks that issue different
// call sequences fail with FAILED_PRECONDITION instead of mixing up data.
//
// Failure handling: the first failure of Run (timeout, peer gone, out of step) closes
// every connection, so the peers' pending and later calls fail at once (UNAVAILABLE)
// instead of waiting out their timeouts; the engine then stays failed.
//
// Memory: all per-call state is preallocated at construction; Run allocates only to
// build an error message. One thread at a time.
#ifndef TANDEM_COMM_TCP_EXCHANGE_H_
#define TANDEM_COMM_TCP_EXCHANGE_H_

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/tcp_socket.h"

namespace tandem {

class TcpExchange {
 public:
  enum class Kind : uint8_t { kAllGather = 1, kAllReduceSum = 2, kBroadcast = 3, kBarrier = 4 };
  static constexpr size_t kHeaderBytes = 16;

  // `peers[r]` is the connection to rank r (the element at `rank` is empty).
  TcpExchange(int rank, std::vector<ScopedFd> peers);

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }

  // Starts planning the next call (numbered one more than the last).
  void Begin(Kind kind);
  // Plans `bytes` of `data` to rank `peer` / from rank `peer` into `data`. The buffers
  // must stay valid until Run returns. At most one of each per peer and call.
  void Send(int peer, const void* data, size_t bytes);
  void Receive(int peer, void* data, size_t bytes);

  // Moves every planned message; returns when all are through (OK) or at the first
  // failure: DEADLINE_EXCEEDED at `deadline` (naming the ranks still owing data),
  // UNAVAILABLE when a peer closed or reset its connection, FAILED_PRECONDITION when a
  // peer's header shows another call. `op` prefixes messages.
  absl::Status Run(absl::Time deadline, absl::string_view op);

  // Closes every connection (peers see end-of-file). Idempotent.
  void CloseAll();

 private:
  struct Transfer {
    bool active = false;
    unsigned char header[kHeaderBytes];
    char* data = nullptr;
    size_t bytes = 0;
    size_t done = 0;  // header and payload bytes moved so far
  };
  struct Peer {
    ScopedFd fd;
    Transfer out;
    Transfer in;
  };

  void EncodeHeader(size_t bytes, unsigned char* out) const;
  // Moves as much of a peer's outgoing / incoming message as the socket takes / holds
  // now, without waiting; marks the transfer finished when it is through.
  absl::Status PushOut(int peer, absl::string_view op);
  absl::Status PullIn(int peer, absl::string_view op);
  absl::Status CheckHeader(int peer, absl::string_view op) const;
  absl::Status TimeoutError(absl::Time deadline, absl::string_view op) const;
  absl::Status Fail(absl::Status status);

  const int rank_;
  std::vector<Peer> peers_;
  uint32_t call_ = 0;
  Kind kind_ = Kind::kBarrier;
  absl::Time started_;
  int active_ = 0;  // transfers planned and not finished
  std::vector<pollfd> poll_fds_;
  std::vector<int> poll_peers_;
  bool closed_ = false;
};

}  // namespace tandem

#endif  // TANDEM_COMM_TCP_EXCHANGE_H_
