// Subcommands of the `tandem` CLI: their flags, help text and entry points, and the
// dispatch from argv.
#ifndef TANDEM_CLIENT_COMMAND_H_
#define TANDEM_CLIENT_COMMAND_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "client/argv.h"

namespace tandem::client {

// One flag as a subcommand documents it. The flag itself is an absl flag named
// `name` (underscores); help shows the dashed form.
struct CommandFlag {
  std::string name;   // absl name, e.g. "max_tokens"
  std::string value;  // Placeholder for the value, e.g. "N"; "" for a boolean.
  std::string help;   // One or more sentences; the default is appended.
};

// What a subcommand receives after flag parsing.
struct Invocation {
  std::vector<std::string> positional;                       // Arguments that are not flags.
  std::set<std::string> specified;                           // Flags given on the command line.
  std::map<std::string, std::vector<std::string>> repeated;  // --stop values etc.
  std::vector<std::string> command_line;                     // argv as typed (for reports).
};

struct Command {
  std::string name;     // "generate"
  std::string summary;  // One line for `tandem --help`.
  std::string usage;    // Synopsis and description for `tandem NAME --help`.
  std::vector<CommandFlag> flags;
  std::set<std::string> repeatable;           // Flags that may be given several times.
  std::function<int(const Invocation&)> run;  // Returns the exit code.
};

// Help of one subcommand: usage, then each flag as "--dashed-name=VALUE" with its help
// and default (taken from the absl flag; omitted when empty or "false").
std::string CommandHelp(const Command& command);

// Help listing every subcommand.
std::string ProgramHelp(const std::vector<Command>& commands);

// Runs the CLI: picks the subcommand from argv[1], normalises and checks its flags,
// prints help on --help, parses with absl and calls it. Usage errors print one line
// and return 2.
int RunCli(const std::vector<Command>& commands, int argc, char** argv);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMAND_H_
