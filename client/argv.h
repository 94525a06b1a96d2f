// Command-line pre-processing for the `tandem` CLI, before absl::ParseCommandLine.
//
// Every flag is an absl flag with an underscore name (`max_tokens`); users may write
// the dashed form (`--max-tokens`). NormalizeArgs rewrites dashed names to underscore
// names, checks each flag against the subcommand's own list (so a flag of another
// subcommand is a clear error instead of being silently ignored), records which flags
// were given (config-file values yield to them), and pulls out repeatable flags
// (`--stop`), which absl cannot repeat.
#ifndef TANDEM_CLIENT_ARGV_H_
#define TANDEM_CLIENT_ARGV_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::client {

// The flags one subcommand accepts.
struct FlagSpec {
  // Underscore name -> true when the flag is boolean (takes no separate value).
  std::map<std::string, bool> flags;
  // Underscore names whose every occurrence is collected into
  // NormalizedArgs::repeated instead of being passed on (each takes a value).
  std::set<std::string> repeatable;
};

struct NormalizedArgs {
  // Arguments to hand to absl::ParseCommandLine (element 0 is the program name).
  std::vector<std::string> argv;
  // Underscore names of the flags present (a `--noNAME` counts as NAME).
  std::set<std::string> specified;
  // Values of repeatable flags, in command-line order.
  std::map<std::string, std::vector<std::string>> repeated;
  // True when -h, --help or --helpfull appeared before `--`.
  bool help = false;
};

// Converts a flag name as typed (`max-tokens`) into the absl name (`max_tokens`).
std::string CanonicalFlagName(const std::string& typed);

// Normalises `args` (the arguments after the subcommand; `program` becomes argv[0]).
// Accepts `--name=value`, `--name value` (non-boolean flags), `-name`, `--noname`
// (boolean), and `--` (everything after it is positional). Fails with a message naming
// the offending argument for an unknown flag or a missing value.
absl::StatusOr<NormalizedArgs> NormalizeArgs(const std::string& program,
                                             const std::vector<std::string>& args,
                                             const FlagSpec& spec);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_ARGV_H_
