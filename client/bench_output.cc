#include "client/bench_output.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "client/child_process.h"

namespace tandem::client {
namespace {

constexpr char kPlotScript[] =
#include "client/plot_script.inc"
    ;

}  // namespace

int PrintOutputCheck(const std::vector<ConfigRun>& runs, const BenchSettings& s,
                     const std::vector<v1::AcceptanceRule>& rules, nlohmann::json* json) {
  const auto comparable = [&s](const ConfigKey& key) {
    if (s.request.temperature.value_or(0) == 0) return true;  // Bench always sets it.
    return s.seed.has_value() &&
           (key.rule == v1::ACCEPTANCE_RULE_COUPLED || key.rule == v1::ACCEPTANCE_RULE_DEFAULT);
  };
  bool any_comparable = false;
  for (v1::AcceptanceRule rule : rules) {
    ConfigKey key;
    key.rule = rule;
    any_comparable |= comparable(key);
  }
  if (!any_comparable) {
    *json = {{"skipped",
              "sampling (temperature > 0) without --seed and rule coupled: outputs agree in "
              "distribution only"}};
    std::printf("Output check: skipped (temperature > 0 without --seed and rule coupled)\n");
    return 0;
  }
  OutputCheck check = CheckOutputsAgainstNone(runs, comparable);
  *json = ToJson(check);
  if (check.compared == 0) {
    std::printf("Output check: nothing to compare (needs `none` and another configuration)\n");
    return 0;
  }
  if (check.ok()) {
    std::printf(
        "Output check: all %d outputs identical to `none` for the same prompt "
        "(greedy, or seeded coupled sampling)\n",
        check.compared);
    return 0;
  }
  std::printf("Output check: FAILED, %zu of %d outputs differ from `none`:\n",
              check.mismatches.size(), check.compared);
  for (size_t i = 0; i < check.mismatches.size() && i < 10; ++i) {
    std::printf("  %s\n", check.mismatches[i].c_str());
  }
  return 1;
}

absl::Status WriteJson(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out.good()) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status Plot(const std::string& python, const std::string& json_path,
                  const std::string& png_path) {
  char script_path[] = "/tmp/tandem-plot-XXXXXX";
  const int fd = mkstemp(script_path);
  if (fd < 0) return absl::InternalError("cannot create a temporary file for the plot script");
  const std::string script = kPlotScript;
  const bool written =
      write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
  close(fd);
  std::string log = std::string(script_path) + ".log";
  absl::Status status;
  if (!written) {
    status = absl::InternalError("cannot write the plot script");
  } else {
    ChildOptions o;
    o.binary = python;
    o.args = {script_path, json_path, png_path};
    o.log_path = log;
    o.death_signal = SIGKILL;
    auto child = ChildProcess::Spawn(o);
    if (!child.ok()) {
      status = child.status();
    } else if (!(*child)->WaitFor(absl::Seconds(120)) || (*child)->exit_code() != 0) {
      status = absl::InternalError(absl::StrCat("plotting failed (", (*child)->ExitDescription(),
                                                "): ", TailOfFile(log, 5)));
    }
  }
  unlink(script_path);
  unlink(log.c_str());
  return status;
}

int WriteOutputs(const nlohmann::json& report, const OutputFiles& files, int exit_code) {
  const std::string& out = files.json;
  std::string json_path = out;
  if (!out.empty()) {
    if (absl::Status st = WriteJson(out, report); !st.ok()) {
      BenchSay(std::string(st.message()));
      return 1;
    }
    BenchSay(absl::StrCat("wrote ", out));
  }
  const std::string& plot = files.plot;
  if (plot.empty()) return exit_code;
  std::string temp_json;
  if (json_path.empty()) {
    temp_json = absl::StrCat("/tmp/tandem-bench-", getpid(), ".json");
    if (absl::Status st = WriteJson(temp_json, report); !st.ok()) {
      BenchSay(std::string(st.message()));
      return 1;
    }
    json_path = temp_json;
  }
  absl::Status st = Plot(files.python, json_path, plot);
  if (!temp_json.empty()) unlink(temp_json.c_str());
  if (!st.ok()) {
    BenchSay(absl::StrCat("no plot: ", st.message(),
                          " (needs python3-matplotlib: apt-get install python3-matplotlib)"));
    return 1;
  }
  BenchSay(absl::StrCat("wrote ", plot));
  return exit_code;
}

}  // namespace tandem::client
