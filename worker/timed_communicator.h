// A Communicator decorator that (1) measures the wall time spent in collectives and
// (2) lets its owner swap the underlying communicator, so a LlamaModel built over it
// survives the re-forming of a tensor-parallel group (each group generation brings a
// fresh communicator).
//
// Thread-safety: the collective calls and Reset() must be serialized by the owner (the
// model's caller); the counters may be read from any thread.
#ifndef TANDEM_WORKER_TIMED_COMMUNICATOR_H_
#define TANDEM_WORKER_TIMED_COMMUNICATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/communicator.h"

namespace tandem {
namespace worker {

class TimedCommunicator final : public Communicator {
 public:
  // A group position (rank of size) that stays fixed across Reset(); `backend` names
  // the collective backend in use ("gloo", "nccl", "local").
  TimedCommunicator(int rank, int size, std::string backend);

  // Installs `inner` (its rank and size must match; nullptr detaches). Collectives
  // without an inner communicator fail with UNAVAILABLE. Returns the previous one.
  std::unique_ptr<Communicator> Reset(std::unique_ptr<Communicator> inner);
  bool attached() const { return inner_ != nullptr; }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return backend_; }

  absl::Status AllReduceSum(float* data, size_t count, absl::Duration timeout) override;
  absl::Status AllGather(const void* in, void* out, size_t bytes, absl::Duration timeout) override;
  absl::Status Broadcast(void* data, size_t bytes, int root, absl::Duration timeout) override;
  absl::Status Barrier(absl::Duration timeout) override;

  // Total wall time inside collectives since construction, nanoseconds.
  int64_t collective_ns() const { return collective_ns_.load(std::memory_order_relaxed); }
  // Number of collective calls made (successful or not) since construction.
  int64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  // Number of collective calls that returned an error since construction.
  int64_t failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  template <typename Fn>
  absl::Status Timed(Fn&& fn);

  const int rank_;
  const int size_;
  const std::string backend_;
  std::unique_ptr<Communicator> inner_;
  std::atomic<int64_t> collective_ns_{0};
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> failures_{0};
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_TIMED_COMMUNICATOR_H_
