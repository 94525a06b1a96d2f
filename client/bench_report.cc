#include "client/bench_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/request_options.h"
#include "client/table.h"

namespace tandem::client {
namespace {

nlohmann::json Number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

nlohmann::json ToJson(const Distribution& d) {
  return {{"count", d.count},     {"mean", Number(d.mean)}, {"p50", Number(d.p50)},
          {"p90", Number(d.p90)}, {"p99", Number(d.p99)},   {"min", Number(d.min)},
          {"max", Number(d.max)}};
}

std::string Describe(const ConfigKey& k) {
  return absl::StrCat(MethodName(k.method), " rule=", AcceptanceRuleName(k.rule),
                      " pipelining=", PipeliningName(k.pipelining), " c=", k.concurrency);
}

std::string Times(double v) { return std::isfinite(v) ? absl::StrFormat("%.2fx", v) : "-"; }

// Median of the finite values (NaN when none).
double Median(std::vector<double> values) {
  values.erase(
      std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
      values.end());
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The `none` row `row` is compared with: same concurrency, preferably the same rule and
// then the same pipelining; null when there is none.
const ConfigResult* BaselineOf(const ConfigResult& row, const std::vector<ConfigResult>& rows) {
  const ConfigResult* base = nullptr;
  int best = -1;
  for (const ConfigResult& other : rows) {
    if (other.key.method != v1::SPECULATION_METHOD_NONE ||
        other.key.concurrency != row.key.concurrency || other.throughput_tok_s <= 0) {
      continue;
    }
    const int score =
        2 * (other.key.rule == row.key.rule) + (other.key.pipelining == row.key.pipelining);
    if (score > best) {
      best = score;
      base = &other;
    }
  }
  return base;
}

// First differing position of two texts, with a little context from each.
std::string FirstDifference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  auto around = [i](const std::string& s) {
    const size_t from = i >= 10 ? i - 10 : 0;
    return absl::CHexEscape(s.substr(from, 30));
  };
  return absl::StrCat("differs at byte ", i, ": none \"", around(a), "\" vs \"", around(b), "\"");
}

}  // namespace

std::string StatusCodeName(absl::StatusCode code) {
  return absl::AsciiStrToLower(absl::StatusCodeToString(code));
}

ConfigResult Aggregate(const ConfigRun& run) {
  ConfigResult row;
  row.key = run.key;
  row.wall_s = run.wall_s;
  row.requests = static_cast<int>(run.results.size());
  std::vector<double> ttft, tpot, latency;
  long long proposed = 0, accepted = 0, steps = 0, decode_tokens = 0, speculative_steps = 0;
  for (const RequestResult& r : run.results) {
    if (r.code != absl::StatusCode::kOk) {
      ++row.errors[StatusCodeName(r.code)];
      continue;
    }
    ++row.ok;
    ttft.push_back(r.ttft_ms);
    tpot.push_back(r.tpot_ms);
    latency.push_back(r.latency_ms);
    if (!r.has_stats) continue;
    row.generated_tokens += r.stats.generated_tokens();
    proposed += r.stats.draft_tokens_proposed();
    accepted += r.stats.draft_tokens_accepted();
    speculative_steps += r.stats.speculative_steps();
    if (r.stats.target_steps() > 0) {
      steps += r.stats.target_steps();
      decode_tokens += std::llround(r.stats.mean_accepted_length() * r.stats.target_steps());
    }
  }
  row.ttft_ms = Summarize(ttft);
  row.tpot_ms = Summarize(tpot);
  row.latency_ms = Summarize(latency);
  if (run.wall_s > 0) {
    row.throughput_tok_s = static_cast<double>(row.generated_tokens) / run.wall_s;
    row.requests_per_s = row.ok / run.wall_s;
  }
  if (proposed > 0) row.acceptance_rate = static_cast<double>(accepted) / proposed;
  if (steps > 0) row.mean_accepted_length = static_cast<double>(decode_tokens) / steps;
  if (speculative_steps > 0) row.cost.k = static_cast<double>(proposed) / speculative_steps;
  return row;
}

void ComputeSpeedups(std::vector<ConfigResult>* rows) {
  for (ConfigResult& row : *rows) {
    const ConfigResult* base = BaselineOf(row, *rows);
    row.speedup_vs_none = base != nullptr ? row.throughput_tok_s / base->throughput_tok_s : NAN;
    CostTerms& cost = row.cost;
    cost.alpha = row.acceptance_rate;
    cost.e = row.mean_accepted_length;
    if (base == nullptr) continue;
    const double t = base->step.target_ms + base->step.rpc_ms;
    if (!(t > 0)) continue;
    cost.nu = (row.step.target_ms + row.step.rpc_ms) / t;
    cost.o = row.step.overhead_ms / t;
    cost.c = cost.k > 0 ? row.step.draft_ms / (cost.k * t) : NAN;
  }
}

std::vector<ConfigResult> MedianOverRounds(const std::vector<std::vector<ConfigResult>>& rounds) {
  std::vector<ConfigResult> medians;
  if (rounds.empty()) return medians;
  for (const ConfigResult& first : rounds[0]) {
    std::vector<const ConfigResult*> same;
    for (const std::vector<ConfigResult>& round : rounds) {
      for (const ConfigResult& r : round) {
        if (r.key == first.key) same.push_back(&r);
      }
    }
    const auto median = [&](auto field) {
      std::vector<double> values;
      for (const ConfigResult* r : same) values.push_back(field(*r));
      return Median(values);
    };
    ConfigResult m = first;
    m.rounds = static_cast<int>(same.size());
    m.requests = m.ok = 0;
    m.generated_tokens = 0;
    for (const ConfigResult* r : same) {
      m.requests += r->requests;
      m.ok += r->ok;
      m.generated_tokens += r->generated_tokens;
    }
    m.throughput_tok_s = median([](const ConfigResult& r) { return r.throughput_tok_s; });
    m.requests_per_s = median([](const ConfigResult& r) { return r.requests_per_s; });
    m.ttft_ms.p50 = median([](const ConfigResult& r) { return r.ttft_ms.p50; });
    m.ttft_ms.p90 = median([](const ConfigResult& r) { return r.ttft_ms.p90; });
    m.ttft_ms.p99 = median([](const ConfigResult& r) { return r.ttft_ms.p99; });
    m.tpot_ms.p50 = median([](const ConfigResult& r) { return r.tpot_ms.p50; });
    m.tpot_ms.p90 = median([](const ConfigResult& r) { return r.tpot_ms.p90; });
    m.tpot_ms.p99 = median([](const ConfigResult& r) { return r.tpot_ms.p99; });
    m.acceptance_rate = median([](const ConfigResult& r) { return r.acceptance_rate; });
    m.mean_accepted_length = median([](const ConfigResult& r) { return r.mean_accepted_length; });
    m.speedup_vs_none = median([](const ConfigResult& r) { return r.speedup_vs_none; });
    m.busy.draft = median([](const ConfigResult& r) { return r.busy.draft; });
    m.busy.target = median([](const ConfigResult& r) { return r.busy.target; });
    m.step.steps = median([](const ConfigResult& r) { return r.step.steps; });
    m.step.draft_ms = median([](const ConfigResult& r) { return r.step.draft_ms; });
    m.step.target_ms = median([](const ConfigResult& r) { return r.step.target_ms; });
    m.step.rpc_ms = median([](const ConfigResult& r) { return r.step.rpc_ms; });
    m.step.overhead_ms = median([](const ConfigResult& r) { return r.step.overhead_ms; });
    m.cost.alpha = median([](const ConfigResult& r) { return r.cost.alpha; });
    m.cost.k = median([](const ConfigResult& r) { return r.cost.k; });
    m.cost.e = median([](const ConfigResult& r) { return r.cost.e; });
    m.cost.c = median([](const ConfigResult& r) { return r.cost.c; });
    m.cost.nu = median([](const ConfigResult& r) { return r.cost.nu; });
    m.cost.o = median([](const ConfigResult& r) { return r.cost.o; });
    medians.push_back(m);
  }
  return medians;
}

OutputCheck CheckOutputsAgainstNone(const std::vector<ConfigRun>& runs,
                                    const std::function<bool(const ConfigKey&)>& compare) {
  std::map<int, const std::string*> baseline;
  for (const ConfigRun& run : runs) {
    if (run.key.method != v1::SPECULATION_METHOD_NONE || !compare(run.key)) continue;
    for (size_t i = 0; i < run.results.size(); ++i) {
      if (run.results[i].code == absl::StatusCode::kOk) {
        baseline.emplace(run.prompt_index[i], &run.results[i].text);
      }
    }
  }
  OutputCheck check;
  for (const ConfigRun& run : runs) {
    if (!compare(run.key)) continue;
    for (size_t i = 0; i < run.results.size(); ++i) {
      const RequestResult& r = run.results[i];
      auto it = baseline.find(run.prompt_index[i]);
      if (r.code != absl::StatusCode::kOk || it == baseline.end() || it->second == &r.text) {
        continue;
      }
      ++check.compared;
      if (r.text != *it->second) {
        check.mismatches.push_back(absl::StrCat(Describe(run.key), " prompt ", run.prompt_index[i],
                                                ": ", FirstDifference(*it->second, r.text)));
      }
    }
  }
  return check;
}

BusyFractions BusyBetween(const std::vector<PrometheusSample>& before,
                          const std::vector<PrometheusSample>& after, double wall_s) {
  BusyFractions busy;
  const std::string sum = "tandem_step_latency_ms_sum";
  // Milliseconds spent in `phases` between the scrapes, as a fraction of the wall time.
  auto fraction = [&](std::initializer_list<const char*> phases) -> double {
    double ms = 0;
    for (const char* phase : phases) {
      std::optional<double> a = FindSample(before, sum, {{"phase", phase}});
      std::optional<double> b = FindSample(after, sum, {{"phase", phase}});
      if (!b.has_value() || wall_s <= 0) return NAN;
      ms += *b - a.value_or(0);
    }
    return std::clamp(ms / (wall_s * 1000.0), 0.0, 1.0);
  };
  busy.draft = fraction({"draft"});
  // The target group is busy computing or exchanging partial results.
  busy.target = fraction({"verify", "collective"});
  if (std::isfinite(busy.draft) || std::isfinite(busy.target)) {
    busy.source = "step time sums over the run (draft; verify + collective)";
    return busy;
  }
  std::optional<double> draft = FindSample(after, "tandem_draft_busy_fraction");
  std::optional<double> target = FindSample(after, "tandem_target_busy_fraction");
  if (draft.has_value() || target.has_value()) {
    busy.draft = draft.value_or(NAN);
    busy.target = target.value_or(NAN);
    busy.source = "busy fraction gauges at the end of the run";
  }
  return busy;
}

StepCosts StepCostsBetween(const std::vector<PrometheusSample>& before,
                           const std::vector<PrometheusSample>& after) {
  const auto growth = [&](const std::string& name, const char* phase) -> double {
    std::optional<double> a = FindSample(before, name, {{"phase", phase}});
    std::optional<double> b = FindSample(after, name, {{"phase", phase}});
    return b.has_value() ? *b - a.value_or(0) : NAN;
  };
  StepCosts step;
  step.steps = growth("tandem_step_latency_ms_count", "verify");
  if (!(step.steps > 0)) return step;
  const auto per_step = [&](const char* phase) {
    const double ms = growth("tandem_step_latency_ms_sum", phase);
    return (std::isfinite(ms) ? ms : 0.0) / step.steps;  // A phase never observed took 0.
  };
  step.draft_ms = per_step("draft");
  step.target_ms = per_step("verify") + per_step("collective");
  step.rpc_ms = per_step("rpc");
  step.overhead_ms = per_step("overhead");
  return step;
}

std::string RenderCostTable(const std::vector<ConfigResult>& rows) {
  TextTable t;
  t.AddRow(
      {"method", "rule", "pipe", "conc", "alpha", "K", "E", "c", "nu", "o", "T ms", "speedup"});
  for (const ConfigResult& r : rows) {
    const double t_ms = r.step.target_ms + r.step.rpc_ms;
    t.AddRow({MethodName(r.key.method), AcceptanceRuleName(r.key.rule),
              PipeliningName(r.key.pipelining), absl::StrCat(r.key.concurrency),
              FormatNumber(r.cost.alpha, 3), FormatNumber(r.cost.k, 2), FormatNumber(r.cost.e, 2),
              FormatNumber(r.cost.c, 3), FormatNumber(r.cost.nu, 2), FormatNumber(r.cost.o, 3),
              FormatNumber(t_ms, 2), Times(r.speedup_vs_none)});
  }
  return t.Render() +
         "(spec/cost_model.h terms: alpha accepted per proposal, K proposals per speculative "
         "step, E tokens per target step; c, nu, o relative to the target step T of `none`, "
         "T = verify + collective + rpc ms per step of that row; needs --metrics)\n";
}

std::string RenderResultsTable(const std::vector<ConfigResult>& rows) {
  TextTable t;
  t.AddRow({"method", "rule", "pipe", "conc", "ok/req", "tok/s", "req/s", "ttft p50", "p90", "p99",
            "tpot p50", "p90", "p99", "accept", "acc.len", "speedup", "draft busy", "target busy"});
  for (const ConfigResult& r : rows) {
    t.AddRow({MethodName(r.key.method), AcceptanceRuleName(r.key.rule),
              PipeliningName(r.key.pipelining), absl::StrCat(r.key.concurrency),
              absl::StrCat(r.ok, "/", r.requests), FormatNumber(r.throughput_tok_s, 1),
              FormatNumber(r.requests_per_s, 2), FormatNumber(r.ttft_ms.p50, 1),
              FormatNumber(r.ttft_ms.p90, 1), FormatNumber(r.ttft_ms.p99, 1),
              FormatNumber(r.tpot_ms.p50, 1), FormatNumber(r.tpot_ms.p90, 1),
              FormatNumber(r.tpot_ms.p99, 1), FormatPercent(r.acceptance_rate),
              FormatNumber(r.mean_accepted_length, 2), Times(r.speedup_vs_none),
              FormatPercent(r.busy.draft), FormatPercent(r.busy.target)});
  }
  return t.Render() +
         "(times in ms; ttft = time to first token, tpot = time per output "
         "token, both as the client sees them)\n";
}

nlohmann::json ToJson(const ConfigResult& r) {
  return {
      {"method", MethodName(r.key.method)},
      {"rule", AcceptanceRuleName(r.key.rule)},
      {"pipelining", PipeliningName(r.key.pipelining)},
      {"concurrency", r.key.concurrency},
      {"rounds", r.rounds},
      {"requests", r.requests},
      {"ok", r.ok},
      {"errors", r.errors},
      {"wall_s", r.wall_s},
      {"generated_tokens", r.generated_tokens},
      {"throughput_tok_s", Number(r.throughput_tok_s)},
      {"requests_per_s", Number(r.requests_per_s)},
      {"ttft_ms", ToJson(r.ttft_ms)},
      {"tpot_ms", ToJson(r.tpot_ms)},
      {"latency_ms", ToJson(r.latency_ms)},
      {"acceptance_rate", Number(r.acceptance_rate)},
      {"mean_accepted_length", Number(r.mean_accepted_length)},
      {"speedup_vs_none", Number(r.speedup_vs_none)},
      {"draft_busy", Number(r.busy.draft)},
      {"target_busy", Number(r.busy.target)},
      {"busy_source", r.busy.source},
      {"cost_terms",
       {{"alpha", Number(r.cost.alpha)},
        {"k", Number(r.cost.k)},
        {"e", Number(r.cost.e)},
        {"c", Number(r.cost.c)},
        {"nu", Number(r.cost.nu)},
        {"o", Number(r.cost.o)}}},
      {"step_ms",
       {{"steps", Number(r.step.steps)},
        {"draft", Number(r.step.draft_ms)},
        {"target", Number(r.step.target_ms)},
        {"rpc", Number(r.step.rpc_ms)},
        {"overhead", Number(r.step.overhead_ms)}}},
  };
}

nlohmann::json ToJson(const OutputCheck& check) {
  return {{"compared", check.compared},
          {"mismatched", check.mismatches.size()},
          {"ok", check.ok()},
          {"mismatches", check.mismatches}};
}

}  // namespace tandem::client
