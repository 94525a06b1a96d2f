#include "worker/timed_communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace worker {

TimedCommunicator::TimedCommunicator(int rank, int size, std::string backend)
    : rank_(rank), size_(size), backend_(std::move(backend)) {}

std::unique_ptr<Communicator> TimedCommunicator::Reset(std::unique_ptr<Communicator> inner) {
  std::swap(inner, inner_);
  return inner;
}

template <typename Fn>
absl::Status TimedCommunicator::Timed(Fn&& fn) {
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (inner_ == nullptr) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    return absl::UnavailableError(
        absl::StrCat("rank ", rank_, " of ", size_, ": the group is not formed"));
  }
  const absl::Time start = absl::Now();
  absl::Status status = fn(*inner_);
  collective_ns_.fetch_add(absl::ToInt64Nanoseconds(absl::Now() - start),
                           std::memory_order_relaxed);
  if (!status.ok()) failures_.fetch_add(1, std::memory_order_relaxed);
  return status;
}

absl::Status TimedCommunicator::AllReduceSum(float* data, size_t count, absl::Duration timeout) {
  return Timed([&](Communicator& c) { return c.AllReduceSum(data, count, timeout); });
}

absl::Status TimedCommunicator::AllGather(const void* in, void* out, size_t bytes,
                                          absl::Duration timeout) {
  return Timed([&](Communicator& c) { return c.AllGather(in, out, bytes, timeout); });
}

absl::Status TimedCommunicator::Broadcast(void* data, size_t bytes, int root,
                                          absl::Duration timeout) {
  return Timed([&](Communicator& c) { return c.Broadcast(data, bytes, root, timeout); });
}

absl::Status TimedCommunicator::Barrier(absl::Duration timeout) {
  return Timed([&](Communicator& c) { return c.Barrier(timeout); });
}

}  // namespace worker
}  // namespace tandem
