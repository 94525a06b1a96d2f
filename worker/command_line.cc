#include "worker/command_line.h"

#include <string>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace tandem {
namespace worker {
namespace {

bool IsUsageFlag(absl::string_view name) {
  return absl::StartsWith(name, "help") || name == "version" || name == "only_check_args" ||
         name == "flagfile" || name == "fromenv" || name == "tryfromenv" || name == "undefok";
}

}  // namespace

absl::Status CheckCommandLine(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") return absl::OkStatus();
    if (!absl::ConsumePrefix(&arg, "-")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", argv[i], "' (flags look like --name=value)"));
    }
    absl::ConsumePrefix(&arg, "-");
    absl::string_view name = arg, value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != absl::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    if (IsUsageFlag(name)) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string error;
    if (flag == nullptr) {
      // --noflag for a boolean flag.
      absl::string_view positive = name;
      if (!has_value && absl::ConsumePrefix(&positive, "no")) {
        absl::CommandLineFlag* negated = absl::FindCommandLineFlag(positive);
        if (negated != nullptr && negated->IsOfType<bool>()) {
          negated->ParseFrom("false", &error);
          continue;
        }
      }
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!has_value) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " is missing its value"));
      }
    }
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad value '", value, "' for --", name, ": ", error));
    }
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace tandem
