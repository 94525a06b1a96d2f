// Key-value store used by the ranks of a collective group to find each other
// (Gloo pair addresses, the NCCL unique id).
//
// Keys are byte strings of 1..512 bytes, values at most 1 MiB (the limits of the
// tandem.v1.Rendezvous protocol, enforced by every implementation so a key that works
// with one store works with all). Values are written once per run in practice; Set
// overwrites. Implementations are thread-safe.
#ifndef TANDEM_COMM_STORE_H_
#define TANDEM_COMM_STORE_H_

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem {

inline constexpr size_t kMaxStoreKeyBytes = 512;
inline constexpr size_t kMaxStoreValueBytes = size_t{1} << 20;
inline constexpr size_t kMaxStoreKeysPerGet = 64;

class Store {
 public:
  virtual ~Store() = default;

  // Stores `value` under `key`, replacing any earlier value.
  // INVALID_ARGUMENT when the key or value is outside the limits above.
  virtual absl::Status Set(absl::string_view key, absl::string_view value) = 0;

  // Returns the values of `keys` (1..64 keys) in key order, waiting up to `timeout`
  // until all of them exist. DEADLINE_EXCEEDED (naming a missing key) when they do not
  // appear in time; a zero timeout checks once.
  virtual absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                                       absl::Duration timeout) = 0;

  // Single-key convenience over Get.
  absl::StatusOr<std::string> GetOne(absl::string_view key, absl::Duration timeout);
};

// Checks a key and value against the limits; the message names `where`.
absl::Status ValidateStoreKey(absl::string_view key, absl::string_view where);
absl::Status ValidateStoreValue(absl::string_view key, absl::string_view value,
                                absl::string_view where);
absl::Status ValidateStoreKeys(const std::vector<std::string>& keys, absl::string_view where);

// Views another store with every key prefixed by `prefix` + "/" (e.g. a run id, so a
// restarted group never reads a stale value). Shares ownership of the base store.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix);

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;

  const std::string& prefix() const { return prefix_; }

 private:
  std::string Join(absl::string_view key) const;

  std::shared_ptr<Store> base_;
  std::string prefix_;
};

// In-process store (one map behind a mutex; Get waits on a condition). Used by tests of
// in-process groups and as the state of the rendezvous service.
class InMemoryStore final : public Store {
 public:
  // `max_total_bytes` bounds the sum of key and value sizes held; a Set beyond it fails
  // with RESOURCE_EXHAUSTED.
  explicit InMemoryStore(size_t max_total_bytes = size_t{256} << 20);

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;

  // Like Get, but gives up early (CANCELLED) once `cancelled()` returns true; it is
  // polled at least every `poll` while waiting. Used by servers to notice callers
  // that went away.
  template <typename CancelledFn>
  absl::StatusOr<std::vector<std::string>> GetUnlessCancelled(const std::vector<std::string>& keys,
                                                              absl::Duration timeout,
                                                              absl::Duration poll,
                                                              CancelledFn cancelled);

  // Wakes every waiter and makes current and future waits fail with UNAVAILABLE.
  void Shutdown();

  size_t num_keys() const;

 private:
  // Waits until all keys exist (OK, values in `*out`), `until` passes
  // (DEADLINE_EXCEEDED naming a missing key and the time waited since `start`), or the
  // store shuts down (UNAVAILABLE).
  absl::Status WaitSlice(const std::vector<std::string>& keys, absl::Time start, absl::Time until,
                         std::vector<std::string>* out);

  const size_t max_total_bytes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  size_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

template <typename CancelledFn>
absl::StatusOr<std::vector<std::string>> InMemoryStore::GetUnlessCancelled(
    const std::vector<std::string>& keys, absl::Duration timeout, absl::Duration poll,
    CancelledFn cancelled) {
  if (absl::Status valid = ValidateStoreKeys(keys, "store Get"); !valid.ok()) return valid;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  std::vector<std::string> values;
  while (true) {
    absl::Status status = WaitSlice(keys, start, std::min(deadline, absl::Now() + poll), &values);
    if (status.ok()) return values;
    if (!absl::IsDeadlineExceeded(status) || absl::Now() >= deadline) return status;
    if (cancelled()) {
      return absl::CancelledError("store Get: the caller went away while waiting");
    }
  }
}

}  // namespace tandem

#endif  // TANDEM_COMM_STORE_H_
