// Finding the server binaries that `tandem up` starts.
#ifndef TANDEM_CLIENT_BINARY_LOCATOR_H_
#define TANDEM_CLIENT_BINARY_LOCATOR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::client {

// Where to look for `name` (e.g. "tandem-worker", built in package `package`, e.g.
// "worker"), in order: next to `self` (this program's path), in the Bazel output tree
// beside it (<dir of self>/../<package>/<name>), in Bazel runfiles
// (<self>.runfiles/tandem/<package>/<name>, $RUNFILES_DIR and $TEST_SRCDIR likewise),
// then each directory of `path_env` (PATH). Pure: checks nothing.
std::vector<std::string> BinaryCandidates(const std::string& self, const std::string& package,
                                          const std::string& name, const std::string& runfiles_dir,
                                          const std::string& test_srcdir,
                                          const std::string& path_env);

// The first executable candidate for this process; NOT_FOUND listing where it looked.
absl::StatusOr<std::string> FindBinary(const std::string& package, const std::string& name);

// Absolute path of this program (/proc/self/exe), "" when unknown.
std::string SelfPath();

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BINARY_LOCATOR_H_
