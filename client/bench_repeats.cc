#include "client/bench_repeats.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/request_options.h"
#include "client/table.h"

namespace tandem::client {
namespace {

nlohmann::json Number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// A table cell for a figure: its median, with the range when the rounds differ.
// `scale` multiplies the values (100 for percentages).
std::string Cell(const RepeatedResult& r, const char* pointer, int digits,
                 const std::string& suffix = "", double scale = 1) {
  const Distribution d = Spread(r, pointer);
  return FormatSpread(d.p50 * scale, d.min * scale, d.max * scale, digits, suffix);
}

// Per-round speedups over `none`, by round.
std::vector<double> Ratios(const RepeatedResult& r) {
  std::vector<double> ratios;
  for (const ConfigResult& row : r.repeats) ratios.push_back(row.speedup_vs_none);
  return ratios;
}

// The "vs A/A" cell of `r`: its verdict, or "-" for plain decoding and rows without a control.
std::string VerdictCell(const std::vector<RepeatedResult>& results, const RepeatedResult& r) {
  const RepeatedResult* control = ControlFor(results, r);
  return control != nullptr ? VerdictName(VerdictAgainstControl(r, *control)) : "-";
}

std::string Counts(const RepeatedResult& r) {
  int ok = 0, requests = 0;
  for (const ConfigResult& row : r.repeats) {
    ok += row.ok;
    requests += row.requests;
  }
  return absl::StrCat(ok, "/", requests);
}

// The results table's cells of `r`, from "method" to "target busy".
std::vector<std::string> ResultCells(const RepeatedResult& r) {
  return {ConfigLabel(r.key),
          AcceptanceRuleName(r.key.rule),
          PipeliningName(r.key.pipelining),
          absl::StrCat(r.key.concurrency),
          Counts(r),
          Cell(r, "/throughput_tok_s", 1),
          Cell(r, "/requests_per_s", 2),
          Cell(r, "/ttft_ms/p50", 1),
          Cell(r, "/ttft_ms/p99", 1),
          Cell(r, "/tpot_ms/p50", 1),
          Cell(r, "/tpot_ms/p99", 1),
          Cell(r, "/acceptance_rate", 1, "%", 100),
          Cell(r, "/mean_accepted_length", 2),
          Cell(r, "/speedup_vs_none", 2, "x"),
          Cell(r, "/cost_terms/predicted_speedup", 2, "x"),
          Cell(r, "/draft_busy", 1, "%", 100),
          Cell(r, "/target_busy", 1, "%", 100)};
}

// The notes under the results table of `rounds` rounds, with or without A/A controls.
std::string ResultsNotes(int rounds, bool with_control) {
  std::string notes =
      "(times in ms; ttft = time to first token, tpot = time per output token, both as the "
      "client sees them;\n predicted = the cost model's speedup from the row's measured terms, "
      "see the cost-model table)\n";
  if (rounds > 1) {
    absl::StrAppend(&notes, "(", rounds,
                    " interleaved rounds: median [min-max] over the rounds; speedup = median of "
                    "the per-round ratios to `none` of the same round)\n");
  }
  if (!with_control) return notes;
  absl::StrAppend(&notes,
                  "(none (A/A): plain decoding measured like `none`, never a baseline: its "
                  "speedup range is this run's noise floor;\n vs A/A: ",
                  VerdictRule(), ";\n");
  if (rounds < kMinVerdictRounds) return notes + " too few rounds for a verdict)\n";
  return notes + absl::StrFormat(
                     " a row as fast as `none` is called faster or slower by chance with "
                     "probability %.1f%% at %d rounds)\n",
                     100 * FalseVerdictChance(rounds, rounds), rounds);
}

}  // namespace

const std::vector<Figure>& RowFigures() {
  using R = const ConfigResult&;
  static const std::vector<Figure> figures = {
      {"/throughput_tok_s", [](R r) { return r.throughput_tok_s; }},
      {"/requests_per_s", [](R r) { return r.requests_per_s; }},
      {"/ttft_ms/mean", [](R r) { return r.ttft_ms.mean; }},
      {"/ttft_ms/p50", [](R r) { return r.ttft_ms.p50; }},
      {"/ttft_ms/p90", [](R r) { return r.ttft_ms.p90; }},
      {"/ttft_ms/p99", [](R r) { return r.ttft_ms.p99; }},
      {"/tpot_ms/mean", [](R r) { return r.tpot_ms.mean; }},
      {"/tpot_ms/p50", [](R r) { return r.tpot_ms.p50; }},
      {"/tpot_ms/p90", [](R r) { return r.tpot_ms.p90; }},
      {"/tpot_ms/p99", [](R r) { return r.tpot_ms.p99; }},
      {"/latency_ms/mean", [](R r) { return r.latency_ms.mean; }},
      {"/latency_ms/p50", [](R r) { return r.latency_ms.p50; }},
      {"/latency_ms/p90", [](R r) { return r.latency_ms.p90; }},
      {"/latency_ms/p99", [](R r) { return r.latency_ms.p99; }},
      {"/acceptance_rate", [](R r) { return r.acceptance_rate; }},
      {"/mean_accepted_length", [](R r) { return r.mean_accepted_length; }},
      {"/speedup_vs_none", [](R r) { return r.speedup_vs_none; }},
      {"/draft_busy", [](R r) { return r.busy.draft; }},
      {"/target_busy", [](R r) { return r.busy.target; }},
      {"/cost_terms/alpha", [](R r) { return r.cost.alpha; }},
      {"/cost_terms/k_mean", [](R r) { return r.cost.k_mean; }},
      {"/cost_terms/speculative_share", [](R r) { return r.cost.speculative_share; }},
      {"/cost_terms/c", [](R r) { return r.cost.draft_cost; }},
      {"/cost_terms/nu", [](R r) { return r.cost.verify_cost; }},
      {"/cost_terms/o", [](R r) { return r.cost.overhead; }},
      {"/cost_terms/expected_tokens", [](R r) { return r.cost.expected_tokens; }},
      {"/cost_terms/predicted_speedup", [](R r) { return r.cost.predicted_speedup; }},
      {"/controller_predicted_speedup", [](R r) { return r.controller_speedup; }},
      {"/speculation_off_share", [](R r) { return r.off_share; }},
      {"/tree_step_share", [](R r) { return r.tree_share; }},
  };
  return figures;
}

Distribution Spread(const RepeatedResult& result, const char* pointer) {
  std::vector<double> values;
  for (const Figure& f : RowFigures()) {
    if (std::string(f.pointer) != pointer) continue;
    for (const ConfigResult& row : result.repeats) values.push_back(f.get(row));
  }
  return Summarize(values);
}

std::vector<RepeatedResult> GroupByConfig(const std::vector<ConfigKey>& configs,
                                          const std::vector<ConfigResult>& rows) {
  std::vector<RepeatedResult> results;
  for (const ConfigKey& key : configs) {
    RepeatedResult r;
    r.key = key;
    for (const ConfigResult& row : rows) {
      if (row.key == key) r.repeats.push_back(row);
    }
    std::stable_sort(
        r.repeats.begin(), r.repeats.end(),
        [](const ConfigResult& a, const ConfigResult& b) { return a.round < b.round; });
    results.push_back(std::move(r));
  }
  return results;
}

const RepeatedResult* ControlFor(const std::vector<RepeatedResult>& results,
                                 const RepeatedResult& row) {
  if (row.key.method == v1::SPECULATION_METHOD_NONE) return nullptr;
  const RepeatedResult* control = nullptr;
  for (const RepeatedResult& other : results) {
    if (!other.key.aa_control || other.key.concurrency != row.key.concurrency) continue;
    if (control == nullptr || (other.key.rule == row.key.rule && control->key.rule != row.key.rule))
      control = &other;
  }
  return control;
}

NoiseVerdict VerdictAgainstControl(const RepeatedResult& row, const RepeatedResult& control) {
  return CompareWithControl(Ratios(row), Ratios(control));
}

std::string RenderResultsTable(const std::vector<RepeatedResult>& results) {
  const bool with_control = std::any_of(results.begin(), results.end(),
                                        [](const RepeatedResult& r) { return r.key.aa_control; });
  TextTable t;
  std::vector<std::string> header = {"method",     "rule",       "pipe",     "conc",    "ok/req",
                                     "tok/s",      "req/s",      "ttft p50", "p99",     "tpot p50",
                                     "p99",        "accept",     "acc.len",  "speedup", "predicted",
                                     "draft busy", "target busy"};
  if (with_control) header.push_back("vs A/A");
  t.AddRow(header);
  int rounds = 0;
  for (const RepeatedResult& r : results) {
    rounds = std::max(rounds, static_cast<int>(r.repeats.size()));
    std::vector<std::string> cells = ResultCells(r);
    if (with_control) cells.push_back(VerdictCell(results, r));
    t.AddRow(cells);
  }
  return t.Render() + ResultsNotes(rounds, with_control);
}

std::string RenderCostTable(const std::vector<RepeatedResult>& results) {
  TextTable t;
  t.AddRow({"method", "rule", "pipe", "conc", "spec", "alpha", "K", "c", "nu", "o", "E",
            "S predicted", "S measured", "S ctl", "off"});
  for (const RepeatedResult& r : results) {
    if (r.key.method == v1::SPECULATION_METHOD_NONE) continue;
    t.AddRow({ConfigLabel(r.key), AcceptanceRuleName(r.key.rule), PipeliningName(r.key.pipelining),
              absl::StrCat(r.key.concurrency),
              Cell(r, "/cost_terms/speculative_share", 1, "%", 100),
              Cell(r, "/cost_terms/alpha", 2), Cell(r, "/cost_terms/k_mean", 2),
              Cell(r, "/cost_terms/c", 3), Cell(r, "/cost_terms/nu", 2),
              Cell(r, "/cost_terms/o", 2), Cell(r, "/cost_terms/expected_tokens", 2),
              Cell(r, "/cost_terms/predicted_speedup", 2, "x"), Cell(r, "/speedup_vs_none", 2, "x"),
              Cell(r, "/controller_predicted_speedup", 2, "x"),
              Cell(r, "/speculation_off_share", 1, "%", 100)});
  }
  return "Cost model (spec/cost_model.h): S = E / (K c + nu + o), E = (1 - alpha^(K+1)) / "
         "(1 - alpha),\nwith the plain steps mixed in: S = (f E + 1 - f) / (f K c + nu + o)\n" +
         t.Render() +
         "(spec = f: share of the target steps that verified proposals; alpha: per-token "
         "acceptance\n that gives the accepted proposals per speculative step at K;\n"
         " K: proposals per speculative step; T: verify call of `none` at this concurrency "
         "in the same round;\n"
         " c = T(draft token) / T, nu = T(verify call) / T, o = extra coordinator time per "
         "step / T; c, nu, o need --metrics;\n"
         " S ctl: the server controller's own modelled speedup, mean over its adaptive steps;\n"
         " off: share of the target steps that verified no proposal, e.g. the controller chose "
         "K = 0)\n";
}

nlohmann::json ToJson(const RepeatedResult& result) {
  nlohmann::json j = {{"method", MethodName(result.key.method)},
                      {"aa_control", result.key.aa_control},
                      {"label", ConfigLabel(result.key)},
                      {"rule", AcceptanceRuleName(result.key.rule)},
                      {"pipelining", PipeliningName(result.key.pipelining)},
                      {"concurrency", result.key.concurrency},
                      {"rounds", result.repeats.size()}};
  int requests = 0, ok = 0;
  long long tokens = 0;
  double wall_s = 0;
  std::map<std::string, int> errors;
  nlohmann::json repeats = nlohmann::json::array();
  for (const ConfigResult& row : result.repeats) {
    requests += row.requests;
    ok += row.ok;
    tokens += row.generated_tokens;
    wall_s += row.wall_s;
    for (const auto& [code, count] : row.errors) errors[code] += count;
    repeats.push_back(ToJson(row));
  }
  j["requests"] = requests;
  j["ok"] = ok;
  j["generated_tokens"] = tokens;
  j["wall_s"] = wall_s;
  j["errors"] = errors;
  nlohmann::json spread = nlohmann::json::object();
  for (const Figure& f : RowFigures()) {
    const Distribution d = Spread(result, f.pointer);
    j[nlohmann::json::json_pointer(f.pointer)] = Number(d.p50);
    spread[f.pointer] = {{"median", Number(d.p50)}, {"min", Number(d.min)}, {"max", Number(d.max)}};
  }
  j["spread"] = spread;
  j["repeats"] = repeats;
  return j;
}

nlohmann::json ResultsJson(const std::vector<RepeatedResult>& results) {
  nlohmann::json out = nlohmann::json::array();
  for (const RepeatedResult& r : results) {
    nlohmann::json j = ToJson(r);
    if (const RepeatedResult* control = ControlFor(results, r); control != nullptr) {
      const Distribution floor = Spread(*control, "/speedup_vs_none");
      const int n = Spread(r, "/speedup_vs_none").count;
      j["vs_aa_control"] = {
          {"verdict", VerdictName(VerdictAgainstControl(r, *control))},
          {"rule", VerdictRule()},
          {"control_speedup",
           {{"median", Number(floor.p50)}, {"min", Number(floor.min)}, {"max", Number(floor.max)}}},
          {"rounds", {n, floor.count}},
          {"false_verdict_chance", Number(FalseVerdictChance(n, floor.count))}};
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace tandem::client
