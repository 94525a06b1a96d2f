// Aggregation of benchmark runs: one row per (method, acceptance rule, pipelining,
// concurrency) configuration and round, speedups and cost-model terms against the
// `none` baseline of the same round, the output check and the row's JSON record.
#ifndef TANDEM_CLIENT_BENCH_REPORT_H_
#define TANDEM_CLIENT_BENCH_REPORT_H_

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "client/bench_schedule.h"
#include "client/cost_terms.h"
#include "client/load_runner.h"
#include "client/prometheus_text.h"
#include "client/stats.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::client {

// One scheduled run of a configuration (a chunk of its round with `tandem bench
// --chunks`, else the whole round): its position in the whole schedule (0-based), its
// chunk index, wall time and generated tokens, and the label (ConfigLabel) of the run
// just before it ("" for the first), so a position effect (a run that follows a heavier
// one, or itself) can be looked for in the JSON.
struct ChunkRecord {
  int position = 0;
  int chunk = 0;
  double wall_s = 0;
  long long generated_tokens = 0;
  std::string after;
};

// Requests of one configuration: results[i] is request number i, which used prompt
// prompt_index[i].
struct ConfigRun {
  ConfigKey key;
  int round = 0;                    // Which --repeat round measured it.
  std::vector<ChunkRecord> chunks;  // In schedule order; empty outside RunRounds.
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

struct ConfigResult {
  ConfigKey key;
  int round = 0;
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
  StepTimes step_times;  // From the coordinator's metrics (set by the caller).
  CostTerms cost;        // alpha and K mean from Aggregate, the rest from ComputeCostTerms.
  // The server's speculation controller, from the requests' stats: the mean of its
  // modelled speedup over the adaptive requests (weighted by target steps; NaN when no
  // request had one), and the steps that verified no proposal, by reason, with their
  // share of all target steps ("not_requested" excluded; NaN without steps).
  double controller_speedup = NAN;
  std::map<std::string, long long> off_steps;
  double off_share = NAN;
  // steps_by_k[K]: target steps that verified K proposals, summed over the requests'
  // stats (index 0 = plain steps); the distribution of the K the server chose.
  std::vector<long long> steps_by_k;
  // Share of the speculative steps that verified a draft tree the controller chose over
  // the chain (RequestStats.tree_steps; NaN without speculative steps).
  double tree_share = NAN;
  std::vector<ChunkRecord> chunks;  // ConfigRun::chunks.
};

// Lower-case status code name, as the server's metrics label it ("ok", "unavailable").
std::string StatusCodeName(absl::StatusCode code);

ConfigResult Aggregate(const ConfigRun& run);

// The `none` row `row` is compared with: same round and concurrency, positive
// throughput, preferably the same acceptance rule and then the same pipelining, else
// any; never an A/A control (ConfigKey::aa_control), not even for a control row;
// nullptr when none.
const ConfigResult* NoneBaseline(const std::vector<ConfigResult>& rows, const ConfigResult& row);

// Sets speedup_vs_none of every row: its throughput over its NoneBaseline's, and adds
// the time terms of its cost model (AddTimeTerms against the baseline's step times).
void ComputeSpeedups(std::vector<ConfigResult>* rows);

// Greedy runs, and seeded runs of the coupled rule (spec/acceptance.h), are lossless
// token for token: every method must produce, for the same prompt, exactly the text
// `none` produced. Compares every successful request with the first successful `none`
// output for its prompt. A/A control runs are compared like any other run, never used
// as the `none` output.
struct OutputCheck {
  int compared = 0;
  std::vector<std::string> mismatches;  // "draft pipelining=on c=4 prompt 3: ..."
  bool ok() const { return compared > 0 && mismatches.empty(); }
};
// Only runs with compare(key) true take part, as baseline or compared.
OutputCheck CheckOutputsAgainstNone(const std::vector<ConfigRun>& runs,
                                    const std::function<bool(const ConfigKey&)>& compare);

// Busy fractions between two scrapes of /metrics taken `wall_s` apart, from the growth
// of the tandem_step_latency_ms sums: draft = phase "draft", target = phases "verify"
// + "collective" (forward pass and tensor-parallel exchanges). If those series are
// missing, the tandem_*_busy_fraction gauges of the later scrape.
BusyFractions BusyBetween(const std::vector<PrometheusSample>& before,
                          const std::vector<PrometheusSample>& after, double wall_s);

nlohmann::json ToJson(const ConfigResult& row);
nlohmann::json ToJson(const OutputCheck& check);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_REPORT_H_
