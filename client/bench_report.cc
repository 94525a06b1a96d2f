#include "client/bench_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/request_options.h"

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
  return absl::StrCat(ConfigLabel(k), " rule=", AcceptanceRuleName(k.rule),
                      " pipelining=", PipeliningName(k.pipelining), " c=", k.concurrency);
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
  row.round = run.round;
  row.chunks = run.chunks;
  long long proposed = 0, accepted = 0, steps = 0, decode_tokens = 0, speculative = 0,
            tree_steps = 0;
  double predicted_sum = 0, predicted_steps = 0;
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
    speculative += r.stats.speculative_steps();
    tree_steps += r.stats.tree_steps();
    if (r.stats.predicted_speedup() > 0) {
      predicted_sum += r.stats.predicted_speedup() * r.stats.target_steps();
      predicted_steps += r.stats.target_steps();
    }
    for (const auto& [reason, n] : r.stats.speculation_off_steps()) row.off_steps[reason] += n;
    const auto& by_k = r.stats.steps_by_k();
    if (row.steps_by_k.size() < static_cast<size_t>(by_k.size()))
      row.steps_by_k.resize(by_k.size());
    for (int k = 0; k < by_k.size(); ++k) row.steps_by_k[k] += by_k[k];
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
  if (speculative > 0) row.tree_share = static_cast<double>(tree_steps) / speculative;
  if (steps > 0) row.mean_accepted_length = static_cast<double>(decode_tokens) / steps;
  row.cost = AcceptanceTerms(proposed, accepted, speculative, steps);
  if (predicted_steps > 0) row.controller_speedup = predicted_sum / predicted_steps;
  if (steps > 0) {
    long long off = 0;
    for (const auto& [reason, n] : row.off_steps) off += reason == "not_requested" ? 0 : n;
    row.off_share = static_cast<double>(off) / steps;
  }
  return row;
}

const ConfigResult* NoneBaseline(const std::vector<ConfigResult>& rows, const ConfigResult& row) {
  const ConfigResult* base = nullptr;
  int best = -1;
  for (const ConfigResult& other : rows) {
    if (other.key.method != v1::SPECULATION_METHOD_NONE || other.key.aa_control ||
        other.round != row.round || other.key.concurrency != row.key.concurrency ||
        other.throughput_tok_s <= 0) {
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

void ComputeSpeedups(std::vector<ConfigResult>* rows) {
  for (ConfigResult& row : *rows) {
    const ConfigResult* base = NoneBaseline(*rows, row);
    row.speedup_vs_none = base != nullptr ? row.throughput_tok_s / base->throughput_tok_s : NAN;
    if (base != nullptr) AddTimeTerms(row.step_times, base->step_times, &row.cost);
  }
}

OutputCheck CheckOutputsAgainstNone(const std::vector<ConfigRun>& runs,
                                    const std::function<bool(const ConfigKey&)>& compare) {
  std::map<int, const std::string*> baseline;
  for (const ConfigRun& run : runs) {
    if (run.key.method != v1::SPECULATION_METHOD_NONE || run.key.aa_control || !compare(run.key)) {
      continue;
    }
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

namespace {

nlohmann::json ChunksJson(const std::vector<ChunkRecord>& chunks) {
  nlohmann::json out = nlohmann::json::array();
  for (const ChunkRecord& c : chunks) {
    out.push_back({{"position", c.position},
                   {"chunk", c.chunk},
                   {"wall_s", c.wall_s},
                   {"generated_tokens", c.generated_tokens},
                   {"after", c.after}});
  }
  return out;
}

}  // namespace

nlohmann::json ToJson(const ConfigResult& r) {
  return {
      {"method", MethodName(r.key.method)},
      {"aa_control", r.key.aa_control},
      {"label", ConfigLabel(r.key)},
      {"rule", AcceptanceRuleName(r.key.rule)},
      {"pipelining", PipeliningName(r.key.pipelining)},
      {"concurrency", r.key.concurrency},
      {"round", r.round},
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
      {"step_times",
       {{"verify_steps", r.step_times.steps},
        {"verify_ms", Number(r.step_times.verify_ms)},
        {"draft_ms", Number(r.step_times.draft_ms)},
        {"overhead_ms", Number(r.step_times.overhead_ms)}}},
      {"cost_terms",
       {{"alpha", Number(r.cost.alpha)},
        {"k_mean", Number(r.cost.k_mean)},
        {"speculative_share", Number(r.cost.speculative_share)},
        {"c", Number(r.cost.draft_cost)},
        {"nu", Number(r.cost.verify_cost)},
        {"o", Number(r.cost.overhead)},
        {"expected_tokens", Number(r.cost.expected_tokens)},
        {"predicted_speedup", Number(r.cost.predicted_speedup)}}},
      {"controller_predicted_speedup", Number(r.controller_speedup)},
      {"speculation_off_steps", r.off_steps},
      {"speculation_off_share", Number(r.off_share)},
      {"steps_by_k", r.steps_by_k},
      {"tree_step_share", Number(r.tree_share)},
      {"chunks", ChunksJson(r.chunks)},
  };
}

nlohmann::json ToJson(const OutputCheck& check) {
  return {{"compared", check.compared},
          {"mismatched", check.mismatches.size()},
          {"ok", check.ok()},
          {"mismatches", check.mismatches}};
}

}  // namespace tandem::client
