#include "comm/store.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {

absl::StatusOr<std::string> Store::GetOne(absl::string_view key, absl::Duration timeout) {
  absl::StatusOr<std::vector<std::string>> values = Get({std::string(key)}, timeout);
  if (!values.ok()) return values.status();
  return std::move((*values)[0]);
}

absl::Status ValidateStoreKey(absl::string_view key, absl::string_view where) {
  if (key.empty() || key.size() > kMaxStoreKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": key must be 1..", kMaxStoreKeyBytes,
                                                   " bytes, got ", key.size(), " bytes"));
  }
  return absl::OkStatus();
}

absl::Status ValidateStoreValue(absl::string_view key, absl::string_view value,
                                absl::string_view where) {
  if (value.size() > kMaxStoreValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": value for key '", key.substr(0, 64),
                                                   "' is ", value.size(), " bytes, the limit is ",
                                                   kMaxStoreValueBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateStoreKeys(const std::vector<std::string>& keys, absl::string_view where) {
  if (keys.empty() || keys.size() > kMaxStoreKeysPerGet) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected 1..", kMaxStoreKeysPerGet, " keys, got ", keys.size()));
  }
  for (const std::string& key : keys) {
    if (absl::Status status = ValidateStoreKey(key, where); !status.ok()) return status;
  }
  return absl::OkStatus();
}

PrefixStore::PrefixStore(std::shared_ptr<Store> base, std::string prefix)
    : base_(std::move(base)), prefix_(std::move(prefix)) {}

std::string PrefixStore::Join(absl::string_view key) const {
  return absl::StrCat(prefix_, "/", key);
}

absl::Status PrefixStore::Set(absl::string_view key, absl::string_view value) {
  return base_->Set(Join(key), value);
}

absl::StatusOr<std::vector<std::string>> PrefixStore::Get(const std::vector<std::string>& keys,
                                                          absl::Duration timeout) {
  std::vector<std::string> joined;
  joined.reserve(keys.size());
  for (const std::string& key : keys) joined.push_back(Join(key));
  return base_->Get(joined, timeout);
}

InMemoryStore::InMemoryStore(size_t max_total_bytes) : max_total_bytes_(max_total_bytes) {}

absl::Status InMemoryStore::Set(absl::string_view key, absl::string_view value) {
  if (absl::Status status = ValidateStoreKey(key, "store Set"); !status.ok()) return status;
  if (absl::Status status = ValidateStoreValue(key, value, "store Set"); !status.ok()) {
    return status;
  }
  absl::MutexLock lock(&mu_);
  if (shut_down_) return absl::UnavailableError("store Set: the store is shut down");
  auto it = values_.find(key);
  size_t old_bytes = it == values_.end() ? 0 : key.size() + it->second.size();
  size_t new_total = total_bytes_ - old_bytes + key.size() + value.size();
  if (new_total > max_total_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("store Set: holding key '", key.substr(0, 64),
                                                     "' would use ", new_total,
                                                     " bytes, the limit is ", max_total_bytes_));
  }
  total_bytes_ = new_total;
  values_[key] = std::string(value);
  return absl::OkStatus();
}

absl::Status InMemoryStore::WaitSlice(const std::vector<std::string>& keys, absl::Time start,
                                      absl::Time until, std::vector<std::string>* out) {
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shut_down_) return true;
    for (const std::string& key : keys) {
      if (!values_.contains(key)) return false;
    }
    return true;
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&ready), until);
  if (shut_down_) return absl::UnavailableError("store Get: the store is shut down");
  size_t missing = 0;
  const std::string* first_missing = nullptr;
  for (const std::string& key : keys) {
    if (!values_.contains(key)) {
      if (first_missing == nullptr) first_missing = &key;
      ++missing;
    }
  }
  if (missing > 0) {
    return absl::DeadlineExceededError(
        absl::StrCat("store Get: ", missing, " of ", keys.size(), " keys missing after waiting ",
                     absl::FormatDuration(absl::Now() - start), ", first missing: '",
                     first_missing->substr(0, 128), "'"));
  }
  out->clear();
  out->reserve(keys.size());
  for (const std::string& key : keys) out->push_back(values_.find(key)->second);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> InMemoryStore::Get(const std::vector<std::string>& keys,
                                                            absl::Duration timeout) {
  if (absl::Status status = ValidateStoreKeys(keys, "store Get"); !status.ok()) return status;
  std::vector<std::string> values;
  absl::Time start = absl::Now();
  absl::Status status = WaitSlice(keys, start, start + timeout, &values);
  if (!status.ok()) return status;
  return values;
}

void InMemoryStore::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
}

size_t InMemoryStore::num_keys() const {
  absl::MutexLock lock(&mu_);
  return values_.size();
}

}  // namespace tandem
