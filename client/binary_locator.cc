#include "client/binary_locator.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tandem::client {

std::vector<std::string> BinaryCandidates(const std::string& self, const std::string& package,
                                          const std::string& name, const std::string& runfiles_dir,
                                          const std::string& test_srcdir,
                                          const std::string& path_env) {
  std::vector<std::string> out;
  const size_t slash = self.rfind('/');
  if (slash != std::string::npos) {
    const std::string dir = self.substr(0, slash);
    out.push_back(absl::StrCat(dir, "/", name));
    out.push_back(absl::StrCat(dir, "/../", package, "/", name));
    out.push_back(absl::StrCat(self, ".runfiles/tandem/", package, "/", name));
  }
  for (const std::string& root : {runfiles_dir, test_srcdir}) {
    if (!root.empty()) out.push_back(absl::StrCat(root, "/tandem/", package, "/", name));
  }
  for (absl::string_view dir : absl::StrSplit(path_env, ':', absl::SkipEmpty())) {
    out.push_back(absl::StrCat(dir, "/", name));
  }
  return out;
}

std::string SelfPath() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

absl::StatusOr<std::string> FindBinary(const std::string& package, const std::string& name) {
  auto env = [](const char* var) {
    const char* v = std::getenv(var);
    return std::string(v != nullptr ? v : "");
  };
  const std::vector<std::string> candidates = BinaryCandidates(
      SelfPath(), package, name, env("RUNFILES_DIR"), env("TEST_SRCDIR"), env("PATH"));
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) {
      char resolved[PATH_MAX];
      return realpath(c.c_str(), resolved) != nullptr ? std::string(resolved) : c;
    }
  }
  return absl::NotFoundError(
      absl::StrCat("cannot find ", name, " (build it with `bazel build //", package, ":", name,
                   "` or pass its path); looked in: ", absl::StrJoin(candidates, ", ")));
}

}  // namespace tandem::client
