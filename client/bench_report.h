// Aggregation of benchmark runs: one row per (method, acceptance rule, pipelining,
// concurrency) configuration, speedups against the `none` baseline, the cost-model terms
// (spec/cost_model.h) measured per configuration, medians over repeated rounds, the
// output check, the text tables and the JSON record.
#ifndef TANDEM_CLIENT_BENCH_REPORT_H_
#define TANDEM_CLIENT_BENCH_REPORT_H_

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "client/load_runner.h"
#include "client/prometheus_text.h"
#include "client/stats.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::client {

struct ConfigKey {
  v1::SpeculationMethod method = v1::SPECULATION_METHOD_NONE;
  v1::Pipelining pipelining = v1::PIPELINING_DEFAULT;
  int concurrency = 1;
  v1::AcceptanceRule rule = v1::ACCEPTANCE_RULE_DEFAULT;
  bool operator==(const ConfigKey& o) const {
    return method == o.method && pipelining == o.pipelining && concurrency == o.concurrency &&
           rule == o.rule;
  }
};

// Requests of one configuration: results[i] is request number i, which used prompt
// prompt_index[i].
struct ConfigRun {
  ConfigKey key;
  std::vector<RequestResult> results;
  std::vector<int> prompt_index;
  double wall_s = 0;  // First request sent to last request finished.
};

// Busy fractions of the two sides over an interval, from the coordinator's metrics.
struct BusyFractions {
  double draft = NAN;
  double target = NAN;
  std::string source;  // How they were obtained ("" when unknown).
};

// Mean wall time per target (verify) batch step over a run, in ms, by phase of
// tandem_step_latency_ms; NaN when the metrics were not read.
struct StepCosts {
  double steps = NAN;        // Verify batch steps in the run.
  double draft_ms = NAN;     // Draft compute per verify step.
  double target_ms = NAN;    // Target forward + collectives.
  double rpc_ms = NAN;       // Wire and serialisation.
  double overhead_ms = NAN;  // Coordinator scheduling and bookkeeping.
};

// The cost-model terms of a configuration (spec/cost_model.h), relative to the target
// step T of `none` at the same concurrency and rule: T = its (target + rpc) ms per step.
struct CostTerms {
  double alpha = NAN;  // Accepted / proposed.
  double k = NAN;      // Proposals per speculative step.
  double e = NAN;      // Tokens committed per target step.
  double c = NAN;      // Draft ms per step / (K T).
  double nu = NAN;     // (target + rpc) ms per step / T.
  double o = NAN;      // Coordinator overhead ms per step / T.
};

struct ConfigResult {
  ConfigKey key;
  int requests = 0;
  int ok = 0;
  std::map<std::string, int> errors;  // Status code name ("deadline_exceeded") -> count.
  double wall_s = 0;
  long long generated_tokens = 0;  // Over successful requests.
  double throughput_tok_s = 0;     // generated_tokens / wall_s.
  double requests_per_s = 0;       // ok / wall_s.
  Distribution ttft_ms, tpot_ms, latency_ms;
  double acceptance_rate = NAN;       // Accepted / proposed over the run; NaN if none proposed.
  double mean_accepted_length = NAN;  // Tokens committed per target step over the run.
  double speedup_vs_none = NAN;       // throughput / throughput of `none` at this concurrency.
  BusyFractions busy;
  StepCosts step;
  CostTerms cost;
  int rounds = 1;  // Rounds a median row summarises (MedianOverRounds).
};

// Lower-case status code name, as the server's metrics label it ("ok", "unavailable").
std::string StatusCodeName(absl::StatusCode code);

ConfigResult Aggregate(const ConfigRun& run);

// Sets speedup_vs_none of every row: its throughput over that of the `none` row with
// the same concurrency (and the same rule, then pipelining, when there is one, else any),
// and its cost terms (`none`'s own: alpha, K, c NaN, nu 1).
void ComputeSpeedups(std::vector<ConfigResult>* rows);

// One row per configuration of the first round: the median over the rounds of every
// number of the tables (throughput, latency percentiles, acceptance, tokens per step,
// speedup, busy fractions, step costs, cost terms); `rounds` set. Rounds must hold the same keys.
std::vector<ConfigResult> MedianOverRounds(const std::vector<std::vector<ConfigResult>>& rounds);

// Greedy runs are lossless: every method must produce, for the same prompt, exactly the
// text `none` produced. Compares every successful request with the first successful
// `none` output for its prompt.
struct OutputCheck {
  int compared = 0;
  std::vector<std::string> mismatches;  // "draft pipelining=on c=4 prompt 3: ..."
  bool ok() const { return compared > 0 && mismatches.empty(); }
};
// Only runs with compare(key) true take part (as baseline or compared); the baseline of
// a prompt is the first `none` output for it.
OutputCheck CheckOutputsAgainstNone(const std::vector<ConfigRun>& runs,
                                    const std::function<bool(const ConfigKey&)>& compare);

// Busy fractions between two scrapes of /metrics taken `wall_s` apart, from the growth
// of the tandem_step_latency_ms sums: draft = phase "draft", target = phases "verify"
// + "collective" (forward pass and tensor-parallel exchanges). If those series are
// missing, the tandem_*_busy_fraction gauges of the later scrape.
BusyFractions BusyBetween(const std::vector<PrometheusSample>& before,
                          const std::vector<PrometheusSample>& after, double wall_s);

// Step costs between two scrapes (tandem_step_latency_ms sums over the verify count).
StepCosts StepCostsBetween(const std::vector<PrometheusSample>& before,
                           const std::vector<PrometheusSample>& after);

// The results table (one row per configuration), and the cost-term table.
std::string RenderResultsTable(const std::vector<ConfigResult>& rows);
std::string RenderCostTable(const std::vector<ConfigResult>& rows);

nlohmann::json ToJson(const ConfigResult& row);
nlohmann::json ToJson(const OutputCheck& check);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_REPORT_H_
