// Small POSIX file helpers shared by the rendezvous file store and `tandem up`.
#ifndef TANDEM_COMMON_FILES_H_
#define TANDEM_COMMON_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem {

// Maps an errno value of an operation on `path` to a status: NotFound (ENOENT,
// ENOTDIR), PermissionDenied (EACCES, EPERM), else Unavailable. The message is
// "<what> '<path>': <strerror>".
absl::Status ErrnoStatus(absl::string_view what, const std::string& path, int err);

// mkdir -p with mode 0755: creates `path` and its missing parents. InvalidArgument for
// an empty path, FailedPrecondition when `path` exists and is not a directory, else an
// ErrnoStatus.
absl::Status MakeDirectories(const std::string& path);

// Writes `value` to `path` so that readers see the old or the whole new contents:
// written to a unique temporary name next to it (removed on failure), then renamed
// into place. Mode 0644. Errors are ErrnoStatus of the failing step.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view value);

}  // namespace tandem

#endif  // TANDEM_COMMON_FILES_H_
