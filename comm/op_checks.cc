#include "comm/op_checks.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace tandem {

absl::Status CheckBuffer(const void* data, size_t bytes, absl::string_view op) {
  if (data == nullptr && bytes > 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": null buffer for ", bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status CheckFloatCount(size_t count, absl::string_view op) {
  if (count > std::numeric_limits<size_t>::max() / (sizeof(float) * 1024)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": count ", count, " is too large"));
  }
  return absl::OkStatus();
}

absl::Status CheckRoot(int root, int size, absl::string_view op) {
  if (root < 0 || root >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": root ", root, " is not a rank of a group of ", size));
  }
  return absl::OkStatus();
}

absl::Status CheckTimeout(absl::Duration timeout, absl::string_view op) {
  if (timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": negative timeout ", absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

}  // namespace tandem
