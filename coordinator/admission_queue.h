// Bounded FIFO of requests waiting for admission into the running batch.
//
// TryPush fails at once with RESOURCE_EXHAUSTED when the queue is full (no blocking,
// so overload turns into fast, explicit rejections). Entries carry a caller-chosen
// unique id so that a cancelled request can be taken out before it is admitted.
// Thread-safe: every method may be called from any thread.
#ifndef TANDEM_COORDINATOR_ADMISSION_QUEUE_H_
#define TANDEM_COORDINATOR_ADMISSION_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem::coordinator {

// The RESOURCE_EXHAUSTED status of a full queue: names the limit and the flag that
// raises it.
absl::Status AdmissionQueueFullError(size_t capacity, absl::string_view limit_flag);
// ALREADY_EXISTS for an id that is already queued.
absl::Status AdmissionQueueDuplicateError(uint64_t id);

template <typename Payload>
class AdmissionQueue {
 public:
  struct Entry {
    uint64_t id;
    Payload payload;
  };

  // `capacity`: most entries waiting at once (0 rejects every push). `limit_flag`: the
  // command-line flag that sets the capacity, quoted in the error message.
  explicit AdmissionQueue(size_t capacity, std::string limit_flag = "--max_queue")
      : capacity_(capacity), limit_flag_(std::move(limit_flag)) {}

  AdmissionQueue(const AdmissionQueue&) = delete;
  AdmissionQueue& operator=(const AdmissionQueue&) = delete;

  // Appends an entry. RESOURCE_EXHAUSTED when full, ALREADY_EXISTS when `id` is queued;
  // on failure `payload` is left as it was (not moved from).
  absl::Status TryPush(uint64_t id, Payload&& payload) {
    absl::MutexLock lock(&mu_);
    if (entries_.size() >= capacity_) return AdmissionQueueFullError(capacity_, limit_flag_);
    if (by_id_.contains(id)) return AdmissionQueueDuplicateError(id);
    entries_.push_back(Entry{id, std::move(payload)});
    by_id_.emplace(id, std::prev(entries_.end()));
    return absl::OkStatus();
  }

  // Removes and returns the up to `n` oldest entries, oldest first.
  std::vector<Entry> PopUpTo(size_t n) {
    std::vector<Entry> out;
    absl::MutexLock lock(&mu_);
    while (out.size() < n && !entries_.empty()) {
      by_id_.erase(entries_.front().id);
      out.push_back(std::move(entries_.front()));
      entries_.pop_front();
    }
    return out;
  }

  // Takes out the entry with `id` (e.g. its client cancelled); nullopt when it is not
  // queued (already admitted or never pushed).
  std::optional<Payload> Remove(uint64_t id) {
    absl::MutexLock lock(&mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return std::nullopt;
    std::optional<Payload> payload(std::move(it->second->payload));
    entries_.erase(it->second);
    by_id_.erase(it);
    return payload;
  }

  // Takes out every entry whose payload satisfies `pred` (called under the queue's
  // lock: keep it cheap, no calls back into the queue), oldest first.
  template <typename Pred>
  std::vector<Entry> RemoveIf(Pred pred) {
    std::vector<Entry> out;
    absl::MutexLock lock(&mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (!pred(static_cast<const Payload&>(it->payload))) {
        ++it;
        continue;
      }
      by_id_.erase(it->id);
      out.push_back(std::move(*it));
      it = entries_.erase(it);
    }
    return out;
  }

  // Blocks until the queue is non-empty or `timeout` passes; true when non-empty.
  bool WaitUntilNonEmpty(absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(this, &AdmissionQueue::HasEntries), timeout);
  }

  size_t size() const {
    absl::MutexLock lock(&mu_);
    return entries_.size();
  }
  bool empty() const { return size() == 0; }
  size_t capacity() const { return capacity_; }

 private:
  bool HasEntries() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !entries_.empty(); }

  const size_t capacity_;
  const std::string limit_flag_;
  mutable absl::Mutex mu_;
  std::list<Entry> entries_ ABSL_GUARDED_BY(mu_);  // Oldest first.
  absl::flat_hash_map<uint64_t, typename std::list<Entry>::iterator> by_id_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_ADMISSION_QUEUE_H_
