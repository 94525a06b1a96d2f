// Strict pre-check of a command line against the registered Abseil flags, so a
// binary can report an unknown flag, a bad flag value or a stray argument as ONE line
// and its own exit code (absl::ParseCommandLine prints several lines and exits 1).
#ifndef TANDEM_WORKER_COMMAND_LINE_H_
#define TANDEM_WORKER_COMMAND_LINE_H_

#include "absl/status/status.h"

namespace tandem {
namespace worker {

// Checks argv[1..argc): every argument is --name=value, --name value (non-boolean
// flags), --name or --noname (boolean flags) for a registered flag, and each value
// parses (it is also stored in the flag, as ParseCommandLine would do). Usage flags
// (--help*, --version, --only_check_args) and everything after "--" are left to
// absl::ParseCommandLine. INVALID_ARGUMENT naming the argument otherwise.
absl::Status CheckCommandLine(int argc, char** argv);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_COMMAND_LINE_H_
