#include "client/argv.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tandem::client {

std::string CanonicalFlagName(const std::string& typed) {
  return absl::StrReplaceAll(typed, {{"-", "_"}});
}

absl::StatusOr<NormalizedArgs> NormalizeArgs(const std::string& program,
                                             const std::vector<std::string>& args,
                                             const FlagSpec& spec) {
  NormalizedArgs out;
  out.argv.push_back(program);
  bool positional_only = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (positional_only || arg.size() < 2 || arg[0] != '-' || arg == "-") {
      out.argv.push_back(arg);
      continue;
    }
    if (arg == "--") {
      positional_only = true;
      out.argv.push_back(arg);
      continue;
    }
    const size_t dashes = absl::StartsWith(arg, "--") ? 2 : 1;
    const size_t eq = arg.find('=');
    const std::string typed =
        arg.substr(dashes, eq == std::string::npos ? std::string::npos : eq - dashes);
    const std::string name = CanonicalFlagName(typed);
    if (name == "help" || name == "h" || name == "helpfull" || name == "helpshort") {
      out.help = true;
      continue;
    }
    std::string known = name;
    bool negated = false;
    if (spec.flags.count(name) == 0 && absl::StartsWith(name, "no") &&
        spec.flags.count(name.substr(2)) > 0 && spec.flags.at(name.substr(2))) {
      known = name.substr(2);
      negated = true;
    }
    auto it = spec.flags.find(known);
    if (it == spec.flags.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", arg, "'"));
    }
    const bool is_bool = it->second;
    if (negated && eq != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("flag '", arg, "' takes no value"));
    }
    out.specified.insert(known);
    std::string value;
    bool has_value = eq != std::string::npos;
    if (has_value) value = arg.substr(eq + 1);
    if (!has_value && !is_bool) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag '", arg, "' needs a value"));
      }
      value = args[++i];
      has_value = true;
    }
    if (spec.repeatable.count(known) > 0) {
      out.repeated[known].push_back(value);
      continue;
    }
    std::string rewritten = absl::StrCat("--", negated ? "no" : "", known);
    if (has_value) absl::StrAppend(&rewritten, "=", value);
    out.argv.push_back(rewritten);
  }
  return out;
}

}  // namespace tandem::client
