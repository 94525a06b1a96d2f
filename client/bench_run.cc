#include "client/bench_run.h"

#include <grpcpp/grpcpp.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/load_runner.h"
#include "client/progress.h"

namespace tandem::client {

void BenchSay(const std::string& line) {
  std::fprintf(stderr, "tandem bench: %s\n", line.c_str());
  std::fflush(stderr);
}

std::string IsoTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

v1::GenerateRequest MakeBenchRequest(const BenchSettings& s, const ConfigKey& key, int number,
                                     int* prompt_index) {
  RequestOptions o = s.request;
  o.method = key.method;
  o.pipelining = key.pipelining;
  o.accept = key.rule;
  if (key.method == v1::SPECULATION_METHOD_NONE) o.k.reset();  // A fixed K contradicts none.
  if (key.tree_nodes.has_value()) {
    o.tree_nodes.reset();
    if (*key.tree_nodes != kServerTreeNodes) o.tree_nodes = *key.tree_nodes;
  }
  *prompt_index = number % static_cast<int>(s.prompts.size());
  if (s.seed.has_value()) o.seed = *s.seed + *prompt_index;
  return *BuildRequest(o, s.prompts[*prompt_index]);  // Options were checked up front.
}

ConfigRun RunConfig(v1::Tandem::Stub* stub, const BenchSettings& s, const ConfigKey& key,
                    int requests, std::atomic<bool>* interrupted, int first_number) {
  ConfigRun run;
  run.key = key;
  run.results.resize(requests);
  run.prompt_index.assign(requests, 0);
  const std::string label =
      absl::StrFormat("%-17s %-9s pipe=%-7s c=%-3d", ConfigLabel(key), AcceptanceRuleName(key.rule),
                      PipeliningName(key.pipelining), key.concurrency);
  ProgressBar bar(stderr, label);
  int done = 0, failed = 0;
  LoadSpec spec;
  spec.concurrency = key.concurrency;
  spec.requests = requests;
  spec.request_timeout = s.timeout;
  const absl::Time start = absl::Now();
  RunLoad(
      stub, spec,
      [&](int number) {
        return MakeBenchRequest(s, key, first_number + number, &run.prompt_index[number]);
      },
      [&](int number, const RequestResult& r) {
        run.results[number] = r;
        ++done;
        if (r.code != absl::StatusCode::kOk) ++failed;
        bar.Update(static_cast<double>(done) / requests,
                   absl::StrCat(done, "/", requests,
                                failed ? absl::StrCat(" (", failed, " failed)") : ""));
      },
      interrupted);
  run.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  run.results.resize(done);
  run.prompt_index.resize(done);
  bar.Finish(absl::StrFormat("%s done: %d requests in %.1fs%s", label, done, run.wall_s,
                             failed ? absl::StrCat(", ", failed, " failed") : ""));
  return run;
}

void AppendRun(ConfigRun&& part, ConfigRun* run) {
  run->results.insert(run->results.end(), std::make_move_iterator(part.results.begin()),
                      std::make_move_iterator(part.results.end()));
  run->prompt_index.insert(run->prompt_index.end(), part.prompt_index.begin(),
                           part.prompt_index.end());
  run->wall_s += part.wall_s;
  run->chunks.insert(run->chunks.end(), part.chunks.begin(), part.chunks.end());
}

void Warmup(v1::Tandem::Stub* stub, const BenchSettings& s, int requests,
            std::atomic<bool>* interrupted) {
  if (requests <= 0) return;
  ConfigKey warm{v1::SPECULATION_METHOD_NONE, v1::PIPELINING_DEFAULT, 1};
  LoadSpec spec;
  spec.requests = requests;
  spec.request_timeout = s.timeout;
  RunLoad(
      stub, spec,
      [&](int n) {
        int p;
        return MakeBenchRequest(s, warm, n, &p);
      },
      [](int, const RequestResult&) {}, interrupted);
}

int CheckServer(v1::Tandem::Stub* stub, const std::string& server,
                const std::vector<v1::SpeculationMethod>& methods, v1::ModelInfo* info) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  ctx.set_wait_for_ready(true);
  grpc::Status st = stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), info);
  if (!st.ok()) {
    BenchSay(absl::StrCat("cannot reach ", server, ": ", st.error_message()));
    return 1;
  }
  for (v1::SpeculationMethod m : methods) {
    bool offered = false;
    for (int served : info->methods()) offered = offered || served == m;
    if (!offered) {
      BenchSay(absl::StrCat("the server does not offer method '", MethodName(m), "'"));
      return 2;
    }
  }
  return 0;
}

}  // namespace tandem::client
