#include "comm/gloo_store_adapter.h"

#include <gloo/common/error.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem {

GlooStoreAdapter::GlooStoreAdapter(tandem::Store& store, absl::Duration default_timeout)
    : store_(store), default_timeout_(default_timeout) {}

void GlooStoreAdapter::Fail(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (first_error_.ok()) first_error_ = status;
  }
  throw gloo::IoException(status.ToString());
}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = store_.Set(key, absl::string_view(data.data(), data.size()));
  if (!status.ok()) Fail(status);
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  absl::StatusOr<std::string> value = store_.GetOne(key, default_timeout_);
  if (!value.ok()) Fail(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds::zero());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  if (keys.empty()) return;
  // gloo uses a zero timeout for "none given".
  absl::Duration budget = timeout.count() > 0 ? absl::FromChrono(timeout) : default_timeout_;
  const absl::Time deadline = absl::Now() + budget;
  // The store takes at most kMaxStoreKeysPerGet keys per call.
  for (size_t begin = 0; begin < keys.size(); begin += kMaxStoreKeysPerGet) {
    size_t end = std::min(keys.size(), begin + kMaxStoreKeysPerGet);
    std::vector<std::string> batch(keys.begin() + begin, keys.begin() + end);
    absl::StatusOr<std::vector<std::string>> values =
        store_.Get(batch, std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (!values.ok()) Fail(values.status());
  }
}

absl::Status GlooStoreAdapter::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

}  // namespace tandem
