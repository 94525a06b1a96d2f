// What `tandem bench` prints and writes at the end: the output check (greedy and
// seeded coupled outputs must equal `none`'s token for token), the JSON report and the
// plot (the bundled plot_results.py, run with the given Python).
#ifndef TANDEM_CLIENT_BENCH_OUTPUT_H_
#define TANDEM_CLIENT_BENCH_OUTPUT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/bench_report.h"
#include "client/bench_run.h"

namespace tandem::client {

// Prints the output check of the runs whose outputs must equal `none`'s for the same
// prompt (greedy ones, and with a seed those of the coupled or default rule), sets
// `*json` to its record; returns 1 when an output differs, else 0.
int PrintOutputCheck(const std::vector<ConfigRun>& runs, const BenchSettings& s,
                     const std::vector<v1::AcceptanceRule>& rules, nlohmann::json* json);

// `j` pretty-printed to `path`; PERMISSION_DENIED when it cannot be written.
absl::Status WriteJson(const std::string& path, const nlohmann::json& j);

// Runs the plot script with `python` on the report at `json_path`, writing `png_path`;
// INTERNAL with the script's last log lines when it fails.
absl::Status Plot(const std::string& python, const std::string& json_path,
                  const std::string& png_path);

struct OutputFiles {
  std::string json;    // --out: the report; empty = none.
  std::string plot;    // --plot: a PNG; empty = none.
  std::string python;  // Interpreter for the plot.
};

// Writes the report and the plot that `files` asks for (the plot from a temporary
// JSON when no --out). Returns `exit_code`, or 1 when writing or plotting failed.
int WriteOutputs(const nlohmann::json& report, const OutputFiles& files, int exit_code);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_OUTPUT_H_
