#include "comm/file_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"

namespace tandem {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path, int err) {
  const absl::Status status = ErrnoStatus(what, path, err);
  return absl::Status(status.code(), absl::StrCat("file store: ", status.message()));
}

// Reads a whole file. NotFound when it does not exist (yet).
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  std::string data;
  char chunk[64 * 1024];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoError("cannot read", path, err);
    }
    if (n == 0) break;
    data.append(chunk, static_cast<size_t>(n));
    if (data.size() > kMaxStoreValueBytes) {
      ::close(fd);
      return absl::DataLossError(
          absl::StrCat("file store: '", path, "' holds more than ", kMaxStoreValueBytes, " bytes"));
    }
  }
  ::close(fd);
  return data;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Open(const std::string& directory) {
  if (absl::Status status = MakeDirectories(directory); !status.ok()) return status;
  return std::unique_ptr<FileStore>(new FileStore(directory));
}

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::CreateFresh(const std::string& parent) {
  if (absl::Status status = MakeDirectories(parent); !status.ok()) return status;
  std::string pattern = absl::StrCat(parent, "/tandem-store-XXXXXX");
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    return ErrnoError("cannot create a fresh directory under", parent, errno);
  }
  return std::unique_ptr<FileStore>(new FileStore(std::string(buffer.data())));
}

std::string FileStore::PathFor(absl::string_view key) const {
  std::string name;
  name.reserve(key.size());
  for (unsigned char c : key) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
    if (plain) {
      name.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&name, "%%%02X", c);
    }
  }
  // A leading '.' would collide with "." and ".."; the escape keeps names distinct.
  if (!name.empty() && name[0] == '.') name = "%2E" + name.substr(1);
  return absl::StrCat(directory_, "/", name);
}

absl::Status FileStore::Set(absl::string_view key, absl::string_view value) {
  if (absl::Status status = ValidateStoreKey(key, "file store Set"); !status.ok()) return status;
  if (absl::Status status = ValidateStoreValue(key, value, "file store Set"); !status.ok()) {
    return status;
  }
  std::string path = PathFor(key);
  if (path.size() - directory_.size() - 1 > 240) {
    return absl::InvalidArgumentError(
        absl::StrCat("file store Set: key '", key.substr(0, 64),
                     "...' is too long for a file name once escaped; use a shorter key"));
  }
  return WriteFileAtomically(path, value);
}

absl::StatusOr<std::vector<std::string>> FileStore::Get(const std::vector<std::string>& keys,
                                                        absl::Duration timeout) {
  if (absl::Status status = ValidateStoreKeys(keys, "file store Get"); !status.ok()) {
    return status;
  }
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  std::vector<std::string> values(keys.size());
  std::vector<bool> have(keys.size(), false);
  absl::Duration pause = absl::Milliseconds(1);
  while (true) {
    size_t missing = 0;
    const std::string* first_missing = nullptr;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (have[i]) continue;
      absl::StatusOr<std::string> value = ReadFile(PathFor(keys[i]));
      if (value.ok()) {
        values[i] = *std::move(value);
        have[i] = true;
      } else if (absl::IsNotFound(value.status())) {
        if (first_missing == nullptr) first_missing = &keys[i];
        ++missing;
      } else {
        return value.status();
      }
    }
    if (missing == 0) return values;
    absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("file store Get in '", directory_, "': ", missing, " of ", keys.size(),
                       " keys missing after waiting ", absl::FormatDuration(now - start),
                       ", first missing: '", first_missing->substr(0, 128), "'"));
    }
    absl::SleepFor(std::min(pause, deadline - now));
    pause = std::min(pause * 2, absl::Milliseconds(20));
  }
}

}  // namespace tandem
