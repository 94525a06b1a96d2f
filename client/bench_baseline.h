// The baseline server of `tandem bench --baseline-server`: plain decoding (`none`) on a
// second server — typically the target alone at tp 1, the best single-process layout on
// a small machine — measured in every round next to the benchmarked server, so a reader
// sees where the measured layout stands against it within one run.
#ifndef TANDEM_CLIENT_BENCH_BASELINE_H_
#define TANDEM_CLIENT_BENCH_BASELINE_H_

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/bench_repeats.h"
#include "client/bench_report.h"
#include "client/bench_run.h"
#include "client/bench_schedule.h"
#include "client/stats.h"

namespace tandem::client {

// Measures `none` on `baseline` at every concurrency level of `configs` (in their
// order of first appearance, the first config's rule), `requests` requests each, and
// appends the rows, marked `round`, to *rows. Stops when *interrupted turns true.
void RunBaselineRound(v1::Tandem::Stub* baseline, const BenchSettings& s,
                      const std::vector<ConfigKey>& configs, int requests, int round,
                      std::atomic<bool>* interrupted, std::vector<ConfigResult>* rows);

// Per concurrency level of the baseline runs: the baseline's throughput (median and
// range over the rounds), and the medians of the per-round ratios of this server's
// `none` and of its fastest configuration in that round to the baseline of that round.
struct BaselineComparison {
  int concurrency = 1;
  Distribution baseline_tok_s;
  Distribution none_ratio;     // This server's `none` / baseline, per round.
  Distribution fastest_ratio;  // This server's fastest row / baseline, per round.
  std::string fastest;         // Method of the fastest row in most rounds ("draft").
};

// `baseline`: rows of the baseline server (method none, any rounds and concurrency
// levels); `results`: the benchmarked server's rows grouped by configuration (its A/A
// controls take no part). A round
// of a level counts only when both sides measured it with positive throughput; levels
// without such a round are left out. One entry per level, ascending.
std::vector<BaselineComparison> CompareWithBaseline(const std::vector<ConfigResult>& baseline,
                                                    const std::vector<RepeatedResult>& results);

// The comparison as a text table headed by `label` (the baseline's description).
std::string RenderBaselineTable(const std::string& label,
                                const std::vector<BaselineComparison>& rows);

nlohmann::json ToJson(const BaselineComparison& row);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_BASELINE_H_
