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

// Adds the growth between two scrapes to *total, sample by sample (same name and
// labels): counters (names ending in _total, _count, _sum or _bucket) add after -
// before (before 0 when absent); any other sample (a gauge) takes its value in
// `after`. Summed over several intervals, *total then reads as one interval's `after`
// against an empty `before` (for StepTimesBetween and BusyBetween).
void AddGrowth(const std::vector<PrometheusSample>& before,
               const std::vector<PrometheusSample>& after, std::vector<PrometheusSample>* total);

// Value of the first sample named `name` whose labels include all of `labels`.
std::optional<double> FindSample(const std::vector<PrometheusSample>& samples,
                                 const std::string& name,
                                 const std::map<std::string, std::string>& labels = {});

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_PROMETHEUS_TEXT_H_
