#include "client/bench_rounds.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/bench_baseline.h"
#include "client/cost_terms.h"
#include "client/http_get.h"

namespace tandem::client {

std::vector<PrometheusSample> ScrapeMetrics(const std::string& address) {
  static std::atomic<bool> warned{false};
  if (address.empty()) return {};
  absl::StatusOr<std::string> body = HttpGet(address, "/metrics", absl::Seconds(5));
  absl::StatusOr<std::vector<PrometheusSample>> samples =
      body.ok() ? ParsePrometheusText(*body)
                : absl::StatusOr<std::vector<PrometheusSample>>(body.status());
  if (!samples.ok()) {
    if (!warned.exchange(true)) {
      BenchSay(absl::StrCat("cannot read metrics: ", samples.status().message()));
    }
    return {};
  }
  return *samples;
}

namespace {

// One configuration in one round: its chunks so far and the metrics' growth over them.
struct Measured {
  ConfigRun run;
  std::vector<PrometheusSample> growth;
};

// The rows of every round with their speedups, grouped by configuration; *runs gets
// the merged runs.
std::vector<RepeatedResult> Results(const std::vector<ConfigKey>& configs, int repeat,
                                    std::map<std::pair<int, int>, Measured>& measured,
                                    std::vector<ConfigRun>* runs) {
  std::vector<std::vector<ConfigResult>> rounds(repeat);
  for (auto& [round_and_config, m] : measured) {
    ConfigResult row = Aggregate(m.run);
    row.busy = BusyBetween({}, m.growth, m.run.wall_s);
    row.step_times = StepTimesBetween({}, m.growth);
    rounds[round_and_config.first].push_back(row);
    runs->push_back(std::move(m.run));
  }
  std::vector<ConfigResult> rows;
  for (std::vector<ConfigResult>& round : rounds) {
    ComputeSpeedups(&round);
    rows.insert(rows.end(), round.begin(), round.end());
  }
  std::vector<RepeatedResult> results = GroupByConfig(configs, rows);
  results.erase(std::remove_if(results.begin(), results.end(),
                               [](const RepeatedResult& r) { return r.repeats.empty(); }),
                results.end());
  return results;
}

}  // namespace

std::vector<RepeatedResult> RunRounds(v1::Tandem::Stub* stub, const BenchSettings& s,
                                      const std::vector<ConfigKey>& configs, const RoundsSpec& spec,
                                      std::atomic<bool>* interrupted, std::vector<ConfigRun>* runs,
                                      v1::Tandem::Stub* baseline,
                                      std::vector<ConfigResult>* baseline_rows) {
  const int repeat = std::max(spec.repeat, 1);
  const auto run_baseline = [&](int round) {
    if (baseline == nullptr) return;
    RunBaselineRound(baseline, s, configs, spec.requests, round, interrupted, baseline_rows);
  };
  std::map<std::pair<int, int>, Measured> measured;
  int current_round = -1, position = 0;
  std::string previous;  // Label of the run before this one.
  for (const ScheduledRun& step : InterleavedSchedule(configs, repeat, spec.chunks)) {
    if (*interrupted) break;
    if (step.round != current_round) {
      if (current_round >= 0) run_baseline(current_round);
      current_round = step.round;
      if (repeat > 1) BenchSay(absl::StrCat("round ", step.round + 1, " of ", repeat));
    }
    int first = 0, count = 0;
    ChunkRequests(spec.requests, spec.chunks, step.chunk, &first, &count);
    const std::vector<PrometheusSample> before = ScrapeMetrics(spec.metrics);
    ConfigRun part = RunConfig(stub, s, configs[step.config], count, interrupted, first);
    const std::vector<PrometheusSample> after = ScrapeMetrics(spec.metrics);
    part.chunks.push_back(
        {position++, step.chunk, part.wall_s, Aggregate(part).generated_tokens, previous});
    previous = ConfigLabel(configs[step.config]);
    Measured& m = measured[{step.round, step.config}];
    m.run.key = part.key;
    m.run.round = step.round;
    AppendRun(std::move(part), &m.run);
    AddGrowth(before, after, &m.growth);
  }
  if (current_round >= 0) run_baseline(current_round);
  return Results(configs, repeat, measured, runs);
}

}  // namespace tandem::client
