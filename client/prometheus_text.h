// Parsing of the Prometheus text exposition format (what a /metrics endpoint
// serves), enough to read counters, gauges and histogram sums.
#ifndef TANDEM_CLIENT_PROMETHEUS_TEXT_H_
#define TANDEM_CLIENT_PROMETHEUS_TEXT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::client {

struct PrometheusSample {
  std::string name;                           // e.g. "tandem_step_latency_ms_sum"
  std::map<std::string, std::string> labels;  // e.g. {"phase": "draft"}
  double value = 0;
};

// Parses every sample line; comments (# HELP/# TYPE) and blank lines are skipped.
// Label values may contain escaped quotes, backslashes and newlines. A trailing
// timestamp is ignored. A malformed line is an error naming its line number.
absl::StatusOr<std::vector<PrometheusSample>> ParsePrometheusText(const std::string& text);

// Value of the first sample named `name` whose labels include all of `labels`.
std::optional<double> FindSample(const std::vector<PrometheusSample>& samples,
                                 const std::string& name,
                                 const std::map<std::string, std::string>& labels = {});

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_PROMETHEUS_TEXT_H_
