#include "client/bench_baseline.h"

#include <algorithm>
#include <map>

#include "client/request_options.h"
#include "client/table.h"

namespace tandem::client {
namespace {

// This server's throughput in one round at one level: `none` and the fastest row.
struct RoundBest {
  double none_tok_s = 0;
  double fastest_tok_s = 0;
  v1::SpeculationMethod fastest = v1::SPECULATION_METHOD_NONE;
};

// (concurrency, round) -> this server's none and fastest rows of that round.
std::map<std::pair<int, int>, RoundBest> BestPerRound(const std::vector<RepeatedResult>& results) {
  std::map<std::pair<int, int>, RoundBest> best;
  for (const RepeatedResult& result : results) {
    for (const ConfigResult& row : result.repeats) {
      if (!(row.throughput_tok_s > 0) || row.key.aa_control) continue;
      RoundBest& b = best[{row.key.concurrency, row.round}];
      if (row.key.method == v1::SPECULATION_METHOD_NONE) {
        b.none_tok_s = std::max(b.none_tok_s, row.throughput_tok_s);
      }
      if (row.throughput_tok_s > b.fastest_tok_s) {
        b.fastest_tok_s = row.throughput_tok_s;
        b.fastest = row.key.method;
      }
    }
  }
  return best;
}

}  // namespace

void RunBaselineRound(v1::Tandem::Stub* baseline, const BenchSettings& s,
                      const std::vector<ConfigKey>& configs, int requests, int round,
                      std::atomic<bool>* interrupted, std::vector<ConfigResult>* rows) {
  std::vector<int> levels;
  for (const ConfigKey& key : configs) {
    if (std::find(levels.begin(), levels.end(), key.concurrency) == levels.end()) {
      levels.push_back(key.concurrency);
    }
  }
  for (int level : levels) {
    if (*interrupted) return;
    const ConfigKey key{v1::SPECULATION_METHOD_NONE, v1::PIPELINING_DEFAULT, level,
                        configs.front().rule};
    ConfigResult row = Aggregate(RunConfig(baseline, s, key, requests, interrupted));
    row.round = round;
    rows->push_back(std::move(row));
  }
}

std::vector<BaselineComparison> CompareWithBaseline(const std::vector<ConfigResult>& baseline,
                                                    const std::vector<RepeatedResult>& results) {
  const std::map<std::pair<int, int>, RoundBest> best = BestPerRound(results);
  struct Level {
    std::vector<double> tok_s, none_ratio, fastest_ratio;
    std::map<v1::SpeculationMethod, int> fastest_count;
  };
  std::map<int, Level> levels;
  for (const ConfigResult& row : baseline) {
    auto it = best.find({row.key.concurrency, row.round});
    if (!(row.throughput_tok_s > 0) || it == best.end()) continue;
    Level& level = levels[row.key.concurrency];
    level.tok_s.push_back(row.throughput_tok_s);
    level.fastest_ratio.push_back(it->second.fastest_tok_s / row.throughput_tok_s);
    if (it->second.none_tok_s > 0) {
      level.none_ratio.push_back(it->second.none_tok_s / row.throughput_tok_s);
    }
    ++level.fastest_count[it->second.fastest];
  }
  std::vector<BaselineComparison> out;
  for (const auto& [concurrency, level] : levels) {
    BaselineComparison c;
    c.concurrency = concurrency;
    c.baseline_tok_s = Summarize(level.tok_s);
    c.none_ratio = Summarize(level.none_ratio);
    c.fastest_ratio = Summarize(level.fastest_ratio);
    int most = 0;
    for (const auto& [method, count] : level.fastest_count) {
      if (count > most) {
        most = count;
        c.fastest = MethodName(method);
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string RenderBaselineTable(const std::string& label,
                                const std::vector<BaselineComparison>& rows) {
  TextTable table;
  table.AddRow(
      {"concurrency", "baseline tok/s", "none / baseline", "fastest", "fastest / baseline"});
  for (const BaselineComparison& r : rows) {
    const Distribution& b = r.baseline_tok_s;
    table.AddRow(
        {std::to_string(r.concurrency), FormatSpread(b.p50, b.min, b.max, 1),
         FormatSpread(r.none_ratio.p50, r.none_ratio.min, r.none_ratio.max, 2, "x"), r.fastest,
         FormatSpread(r.fastest_ratio.p50, r.fastest_ratio.min, r.fastest_ratio.max, 2, "x")});
  }
  return "Against the baseline server (" + label + "), medians of per-round ratios:\n" +
         table.Render();
}

nlohmann::json ToJson(const BaselineComparison& row) {
  const auto spread = [](const Distribution& d) {
    return nlohmann::json{{"median", d.p50}, {"min", d.min}, {"max", d.max}};
  };
  return {{"concurrency", row.concurrency},
          {"baseline_tok_s", spread(row.baseline_tok_s)},
          {"none_over_baseline", spread(row.none_ratio)},
          {"fastest_over_baseline", spread(row.fastest_ratio)},
          {"fastest_method", row.fastest}};
}

}  // namespace tandem::client
