#include "client/command.h"

#include <cstdio>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace tandem::client {
namespace {

std::string Dashed(const std::string& name) { return absl::StrReplaceAll(name, {{"_", "-"}}); }

// Greedy word wrap of `text` to `width` columns, each line prefixed by `indent`.
std::string Wrap(const std::string& text, size_t width, const std::string& indent) {
  std::string out, line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, indent, line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, indent, line, "\n");
  return out;
}

bool IsBoolFlag(const std::string& name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag != nullptr && flag->IsOfType<bool>();
}

}  // namespace

std::string CommandHelp(const Command& command) {
  std::string out = absl::StrCat(command.usage,
                                 "\n\nFlags (--name=value or --name value; "
                                 "--name_with_underscores works too):\n");
  for (const CommandFlag& f : command.flags) {
    std::string head = absl::StrCat("  --", Dashed(f.name));
    if (!f.value.empty()) absl::StrAppend(&head, "=", f.value);
    std::string help = f.help;
    if (const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(f.name)) {
      const std::string def = flag->DefaultValue();
      if (!def.empty() && def != "false") absl::StrAppend(&help, " Default: ", def, ".");
    }
    if (command.repeatable.count(f.name) > 0) absl::StrAppend(&help, " Repeatable.");
    absl::StrAppend(&out, head, "\n", Wrap(help, 76, "      "));
  }
  absl::StrAppend(&out, "  --help\n      Show this help.\n");
  return out;
}

std::string ProgramHelp(const std::vector<Command>& commands) {
  std::string out =
      "tandem: client and local launcher of the Tandem speculative-decoding server.\n\n"
      "Usage: tandem COMMAND [flags] [args]\n\nCommands:\n";
  size_t width = 0;
  for (const Command& c : commands) width = std::max(width, c.name.size());
  for (const Command& c : commands) {
    absl::StrAppend(&out, "  ", c.name, std::string(width - c.name.size() + 2, ' '), c.summary,
                    "\n");
  }
  absl::StrAppend(&out, "\nRun `tandem COMMAND --help` for the flags of a command.\n");
  return out;
}

int RunCli(const std::vector<Command>& commands, int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    if (argc >= 3 && std::string(argv[1]) == "help") {
      for (const Command& c : commands) {
        if (c.name == argv[2]) {
          std::fputs(CommandHelp(c).c_str(), stdout);
          return 0;
        }
      }
    }
    std::fputs(ProgramHelp(commands).c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  const Command* command = nullptr;
  for (const Command& c : commands) {
    if (c.name == name) command = &c;
  }
  if (command == nullptr) {
    std::fprintf(stderr, "tandem: unknown command '%s' (run `tandem --help`)\n", name.c_str());
    return 2;
  }
  FlagSpec spec;
  for (const CommandFlag& f : command->flags) spec.flags[f.name] = IsBoolFlag(f.name);
  spec.repeatable = command->repeatable;
  const std::vector<std::string> args(argv + 2, argv + argc);
  absl::StatusOr<NormalizedArgs> normalized =
      NormalizeArgs(absl::StrCat(argv[0], " ", name), args, spec);
  if (!normalized.ok()) {
    std::fprintf(stderr, "tandem %s: %s (run `tandem %s --help`)\n", name.c_str(),
                 std::string(normalized.status().message()).c_str(), name.c_str());
    return 2;
  }
  if (normalized->help) {
    std::fputs(CommandHelp(*command).c_str(), stdout);
    return 0;
  }
  std::vector<char*> parse_argv;
  for (std::string& a : normalized->argv) parse_argv.push_back(a.data());
  parse_argv.push_back(nullptr);
  std::vector<char*> rest =
      absl::ParseCommandLine(static_cast<int>(parse_argv.size() - 1), parse_argv.data());
  Invocation invocation;
  for (size_t i = 1; i < rest.size(); ++i) invocation.positional.push_back(rest[i]);
  invocation.specified = normalized->specified;
  invocation.repeated = normalized->repeated;
  invocation.command_line.assign(argv, argv + argc);
  return command->run(invocation);
}

}  // namespace tandem::client
