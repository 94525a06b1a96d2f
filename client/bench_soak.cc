#include "client/bench_soak.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/load_runner.h"
#include "client/machine_info.h"
#include "client/progress.h"
#include "client/table.h"

namespace tandem::client {

nlohmann::json ReportSoak(const ConfigResult& row, absl::Time start, absl::Time end,
                          const RssTracker& rss, bool interrupted) {
  std::printf("Soak: %s to %s (%.1f s), %s, concurrency %d\n", IsoTime(start).c_str(),
              IsoTime(end).c_str(), row.wall_s, MethodName(row.key.method).c_str(),
              row.key.concurrency);
  std::printf("  requests served: %d, failed: %d\n", row.ok, row.requests - row.ok);
  for (const auto& [code, count] : row.errors) std::printf("    %s: %d\n", code.c_str(), count);
  std::printf("  throughput: %.1f tok/s, %.2f req/s; latency p50/p90/p99: %s/%s/%s ms\n",
              row.throughput_tok_s, row.requests_per_s, FormatNumber(row.latency_ms.p50, 0).c_str(),
              FormatNumber(row.latency_ms.p90, 0).c_str(),
              FormatNumber(row.latency_ms.p99, 0).c_str());
  nlohmann::json rss_json = rss.PrintAndJson();
  return {{"start", IsoTime(start)},   {"end", IsoTime(end)},
          {"duration_s", row.wall_s},  {"interrupted", interrupted},
          {"requests_served", row.ok}, {"requests_failed", row.requests - row.ok},
          {"errors", row.errors},      {"rss", rss_json},
          {"result", ToJson(row)}};
}

SoakResult RunSoak(v1::Tandem::Stub* stub, const BenchSettings& s, const ConfigKey& key,
                   absl::Duration duration, const std::vector<pid_t>& pids,
                   std::atomic<bool>* interrupted) {
  RssTracker rss(pids);
  ConfigRun run;
  run.key = key;
  ProgressBar bar(stderr, absl::StrFormat("soak %s c=%d", MethodName(key.method), key.concurrency));
  const absl::Time start = absl::Now();
  absl::Time last_rss = start;
  int failed = 0;
  LoadSpec spec;
  spec.concurrency = key.concurrency;
  spec.duration = duration;
  spec.request_timeout = s.timeout;
  RunLoad(
      stub, spec,
      [&](int number) {
        int prompt = 0;
        return MakeBenchRequest(s, key, number, &prompt);
      },
      [&](int, const RequestResult& r) {
        RequestResult kept = r;
        kept.text.clear();  // Not needed; keeps memory flat over long soaks.
        run.results.push_back(std::move(kept));
        run.prompt_index.push_back(0);
        if (r.code != absl::StatusCode::kOk) ++failed;
        const absl::Time now = absl::Now();
        if (now - last_rss >= absl::Seconds(5)) {
          rss.Sample();
          last_rss = now;
        }
        bar.Update(absl::FDivDuration(now - start, duration),
                   absl::StrCat(run.results.size(), " req, ", failed, " failed"));
      },
      interrupted);
  const absl::Time end = absl::Now();
  rss.Sample();
  run.wall_s = absl::ToDoubleSeconds(end - start);
  ConfigResult row = Aggregate(run);
  bar.Finish("");
  return {ReportSoak(row, start, end, rss, interrupted->load()), row.ok > 0};
}

}  // namespace tandem::client
