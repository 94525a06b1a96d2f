// Summary of a configuration measured in several --repeat rounds: each figure's
// median and min-max over the rounds, the results and cost-model tables, and the JSON
// record carrying every round.
#ifndef TANDEM_CLIENT_BENCH_REPEATS_H_
#define TANDEM_CLIENT_BENCH_REPEATS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/bench_report.h"
#include "client/bench_verdict.h"
#include "client/stats.h"

namespace tandem::client {

// One configuration over the rounds: repeats[i] is its result in round i, with its
// speedup and cost terms already computed against `none` of that round
// (ComputeSpeedups on the round's rows).
struct RepeatedResult {
  ConfigKey key;
  std::vector<ConfigResult> repeats;
};

// A number of a row, named by its JSON pointer in ToJson(ConfigResult)
// ("/throughput_tok_s", "/ttft_ms/p50", "/cost_terms/nu").
struct Figure {
  const char* pointer;
  double (*get)(const ConfigResult& row);
};
// Every figure summarised over the rounds.
const std::vector<Figure>& RowFigures();

// The figure over the rounds (NaN rounds ignored): p50 is the median, min and max the
// range. For "/speedup_vs_none" this is the median of the per-round ratios, each
// against the `none` run measured in the same round, not a ratio of medians.
Distribution Spread(const RepeatedResult& result, const char* pointer);

// Groups the rows of every round (any order) into one result per configuration, in
// `configs` order, each with its rows sorted by round. Rows whose key is not in
// `configs` are dropped.
std::vector<RepeatedResult> GroupByConfig(const std::vector<ConfigKey>& configs,
                                          const std::vector<ConfigResult>& rows);

// The A/A control `row` is judged against (`tandem bench --aa-control`): the control of
// the same concurrency, preferably of the same acceptance rule; nullptr when `row` is
// plain decoding (`none` or a control itself) or no control was measured at its level.
const RepeatedResult* ControlFor(const std::vector<RepeatedResult>& results,
                                 const RepeatedResult& row);

// CompareWithControl on the per-round speedups of `row` and of `control`.
NoiseVerdict VerdictAgainstControl(const RepeatedResult& row, const RepeatedResult& control);

// Results table: one line per configuration; with several rounds each figure reads
// "median [min-max]". When `results` has A/A controls, a column "vs A/A" gives each
// speculative row's VerdictAgainstControl ("-" for plain rows).
std::string RenderResultsTable(const std::vector<RepeatedResult>& results);

// Cost-model table: one line per speculative configuration with alpha, K mean, c, nu,
// o, E, the predicted speedup S = E / (K c + nu + o) and the measured one.
std::string RenderCostTable(const std::vector<RepeatedResult>& results);

// Key fields ("aa_control": whether it is the A/A control, "label" its ConfigLabel);
// counts (requests, ok, generated_tokens, errors, wall_s) summed over the rounds; every
// RowFigures() figure at its median; "spread": pointer -> {median, min, max};
// "repeats": ToJson of every round.
nlohmann::json ToJson(const RepeatedResult& result);

// ToJson of every result, in order; each speculative row with a ControlFor also gets
// "vs_aa_control": {"verdict" (VerdictName), "rule" (the rule stated in words),
// "control_speedup" {median, min, max}, "rounds" (row's, control's), and
// "false_verdict_chance" (FalseVerdictChance of those rounds)}.
nlohmann::json ResultsJson(const std::vector<RepeatedResult>& results);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_REPEATS_H_
