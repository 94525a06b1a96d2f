#include "comm/tcp_mesh_communicator.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/op_checks.h"
#include "comm/rank_order_sum.h"
#include "comm/tcp_exchange.h"

namespace tandem {
namespace {

using Kind = TcpExchange::Kind;

class TcpMeshCommunicator final : public Communicator {
 public:
  TcpMeshCommunicator(int rank, std::vector<ScopedFd> peers)
      : exchange_(rank, std::move(peers)),
        all_gather_(Name("AllGather")),
        all_reduce_(Name("AllReduceSum")),
        broadcast_(Name("Broadcast")),
        barrier_(Name("Barrier")),
        blocks_(static_cast<size_t>(size())) {}

  int rank() const override { return exchange_.rank(); }
  int size() const override { return exchange_.size(); }
  std::string backend() const override { return "tcp"; }

  absl::Status AllReduceSum(float* data, size_t count, absl::Duration timeout) override {
    if (absl::Status s = CheckFloatCount(count, all_reduce_); !s.ok()) return s;
    if (absl::Status s = Check(data, count * sizeof(float), timeout, all_reduce_); !s.ok()) {
      return s;
    }
    if (count == 0 || size() == 1 || !broken_.ok()) return broken_;
    const absl::Time deadline = absl::Now() + timeout;
    const size_t total = count * static_cast<size_t>(size());
    if (scratch_.size() < total) scratch_.resize(total);
    const size_t bytes = count * sizeof(float);
    exchange_.Begin(Kind::kAllReduceSum);
    for (int p = 0; p < size(); ++p) {
      if (p == rank()) continue;
      exchange_.Send(p, data, bytes);
      exchange_.Receive(p, scratch_.data() + static_cast<size_t>(p) * count, bytes);
    }
    if (absl::Status s = Finish(exchange_.Run(deadline, all_reduce_)); !s.ok()) return s;
    for (int p = 0; p < size(); ++p) {
      blocks_[p] = p == rank() ? data : scratch_.data() + static_cast<size_t>(p) * count;
    }
    SumInRankOrder(blocks_.data(), size(), count, data);
    return absl::OkStatus();
  }

  absl::Status AllGather(const void* in, void* out, size_t bytes, absl::Duration timeout) override {
    if (absl::Status s = Check(in, bytes, timeout, all_gather_); !s.ok()) return s;
    if (absl::Status s = CheckBuffer(out, bytes * size(), all_gather_); !s.ok()) return s;
    if (bytes == 0 || !broken_.ok()) return broken_;
    char* gathered = static_cast<char*>(out);
    char* own = gathered + static_cast<size_t>(rank()) * bytes;
    if (own != in) std::memmove(own, in, bytes);
    if (size() == 1) return absl::OkStatus();
    const absl::Time deadline = absl::Now() + timeout;
    exchange_.Begin(Kind::kAllGather);
    for (int p = 0; p < size(); ++p) {
      if (p == rank()) continue;
      exchange_.Send(p, own, bytes);
      exchange_.Receive(p, gathered + static_cast<size_t>(p) * bytes, bytes);
    }
    return Finish(exchange_.Run(deadline, all_gather_));
  }

  absl::Status Broadcast(void* data, size_t bytes, int root, absl::Duration timeout) override {
    if (absl::Status s = Check(data, bytes, timeout, broadcast_); !s.ok()) return s;
    if (absl::Status s = CheckRoot(root, size(), broadcast_); !s.ok()) return s;
    if (bytes == 0 || size() == 1 || !broken_.ok()) return broken_;
    const absl::Time deadline = absl::Now() + timeout;
    exchange_.Begin(Kind::kBroadcast);
    if (rank() == root) {
      for (int p = 0; p < size(); ++p) {
        if (p != root) exchange_.Send(p, data, bytes);
      }
    } else {
      exchange_.Receive(root, data, bytes);
    }
    return Finish(exchange_.Run(deadline, broadcast_));
  }

  absl::Status Barrier(absl::Duration timeout) override {
    if (absl::Status s = CheckTimeout(timeout, barrier_); !s.ok()) return s;
    if (size() == 1 || !broken_.ok()) return broken_;
    const absl::Time deadline = absl::Now() + timeout;
    exchange_.Begin(Kind::kBarrier);
    for (int p = 0; p < size(); ++p) {
      if (p == rank()) continue;
      exchange_.Send(p, nullptr, 0);
      exchange_.Receive(p, nullptr, 0);
    }
    return Finish(exchange_.Run(deadline, barrier_));
  }

 private:
  std::string Name(absl::string_view op) const {
    return absl::StrCat("tcp ", op, " (rank ", rank(), " of ", size(), ")");
  }

  static absl::Status Check(const void* data, size_t bytes, absl::Duration timeout,
                            absl::string_view op) {
    if (absl::Status s = CheckBuffer(data, bytes, op); !s.ok()) return s;
    return CheckTimeout(timeout, op);
  }

  // Records the first failure: the exchange has closed its connections, and every later
  // call returns this error.
  absl::Status Finish(absl::Status status) {
    if (!status.ok()) {
      broken_ = absl::Status(status.code(),
                             absl::StrCat("communicator failed earlier: ", status.message()));
    }
    return status;
  }

  TcpExchange exchange_;
  // Operation names for messages, built once (no formatting per call).
  const std::string all_gather_, all_reduce_, broadcast_, barrier_;
  // Gathered inputs of AllReduceSum (rank r's block at r * count; this rank's unused),
  // grown on demand and reused; blocks_ points at the blocks to sum.
  std::vector<float> scratch_;
  std::vector<const float*> blocks_;
  // OK until a call fails; then that failure, returned by every later call.
  absl::Status broken_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateTcpMeshCommunicator(
    int rank, int size, Store& store, const TcpMeshOptions& options) {
  absl::StatusOr<std::vector<ScopedFd>> peers = ConnectTcpMesh(rank, size, store, options);
  if (!peers.ok()) return peers.status();
  return std::unique_ptr<Communicator>(new TcpMeshCommunicator(rank, *std::move(peers)));
}

}  // namespace tandem
