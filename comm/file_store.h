// Store backed by a directory on a local file system: one file per key, written to a
// temporary name and renamed into place, so readers never see half a value. For ranks
// on one machine (tests, `tandem up`). Use a fresh directory (or a unique key prefix)
// per run: values from an earlier run under the same keys would be read as current.
#ifndef TANDEM_COMM_FILE_STORE_H_
#define TANDEM_COMM_FILE_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/store.h"

namespace tandem {

class FileStore final : public Store {
 public:
  // Uses `directory`, creating it (and missing parents) when needed.
  // Fails when it cannot be created or is not a directory.
  static absl::StatusOr<std::unique_ptr<FileStore>> Open(const std::string& directory);

  // Creates a new, empty, uniquely named directory under `parent` (e.g. "/tmp") and
  // opens a store in it. The directory is not removed afterwards.
  static absl::StatusOr<std::unique_ptr<FileStore>> CreateFresh(const std::string& parent);

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  // Polls the directory (1 ms growing to 20 ms between looks) until all keys exist.
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;

  const std::string& directory() const { return directory_; }

 private:
  explicit FileStore(std::string directory) : directory_(std::move(directory)) {}

  // File name for a key: bytes outside [A-Za-z0-9._-] are written as %XX.
  std::string PathFor(absl::string_view key) const;

  std::string directory_;
};

}  // namespace tandem

#endif  // TANDEM_COMM_FILE_STORE_H_
