#include "client/bench_command.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/bench_repeats.h"
#include "client/bench_report.h"
#include "client/bench_schedule.h"
#include "client/child_process.h"
#include "client/cost_terms.h"
#include "client/http_get.h"
#include "client/load_runner.h"
#include "client/machine_info.h"
#include "client/progress.h"
#include "client/prompts.h"
#include "client/request_options.h"
#include "client/server_channel.h"
#include "client/shared_flags.h"
#include "client/table.h"

ABSL_FLAG(std::string, prompts, "bench/prompts/code_completion.jsonl", "Prompts file.");
ABSL_FLAG(std::string, concurrency, "1", "Concurrency levels.");
ABSL_FLAG(int, requests, 8, "Requests per configuration.");
ABSL_FLAG(int, repeat, 1, "Interleaved rounds over all configurations.");
ABSL_FLAG(std::string, methods, "none,draft", "Methods to compare.");
ABSL_FLAG(std::string, rules, "default", "Acceptance rules to compare.");
ABSL_FLAG(std::string, out, "", "JSON results file.");
ABSL_FLAG(std::string, plot, "", "PNG plot file.");
ABSL_FLAG(std::string, metrics, "", "Coordinator metrics address.");
ABSL_FLAG(int, warmup, 1, "Unmeasured requests first.");
ABSL_FLAG(absl::Duration, soak, absl::ZeroDuration(), "Soak duration.");
ABSL_FLAG(std::string, pids, "", "Server process ids for RSS.");
ABSL_FLAG(std::string, python, "/usr/bin/python3", "Python with matplotlib.");

namespace tandem::client {
namespace {

constexpr char kPlotScript[] =
#include "client/plot_script.inc"
    ;

void Say(const std::string& line) {
  std::fprintf(stderr, "tandem bench: %s\n", line.c_str());
  std::fflush(stderr);
}

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted = true; }

std::string Iso(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

nlohmann::json MachineJson() {
  MachineInfo m = GetMachineInfo();
  return {{"hostname", m.hostname},         {"kernel", m.kernel},
          {"cpu_model", m.cpu_model},       {"online_cpus", m.online_cpus},
          {"allowed_cpus", m.allowed_cpus}, {"memory_gib", m.memory_gib}};
}

nlohmann::json ProtoJson(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) return nullptr;
  return nlohmann::json::parse(text, nullptr, false);
}

// Scrapes /metrics; empty on any failure (warned about once).
std::vector<PrometheusSample> Scrape(const std::string& address) {
  static bool warned = false;
  if (address.empty()) return {};
  absl::StatusOr<std::string> body = HttpGet(address, "/metrics", absl::Seconds(5));
  absl::StatusOr<std::vector<PrometheusSample>> samples =
      body.ok() ? ParsePrometheusText(*body)
                : absl::StatusOr<std::vector<PrometheusSample>>(body.status());
  if (!samples.ok()) {
    if (!warned) Say(absl::StrCat("cannot read metrics: ", samples.status().message()));
    warned = true;
    return {};
  }
  return *samples;
}

struct BenchSettings {
  std::vector<std::string> prompts;
  RequestOptions request;
  absl::Duration timeout;
  std::optional<uint64_t> seed;  // Requests for prompt i carry seed + i.
};

v1::GenerateRequest MakeRequest(const BenchSettings& s, const ConfigKey& key, int number,
                                int* prompt_index) {
  RequestOptions o = s.request;
  o.method = key.method;
  o.pipelining = key.pipelining;
  o.accept = key.rule;
  if (key.method == v1::SPECULATION_METHOD_NONE) o.k.reset();  // A fixed K contradicts none.
  *prompt_index = number % static_cast<int>(s.prompts.size());
  if (s.seed.has_value()) o.seed = *s.seed + *prompt_index;
  return *BuildRequest(o, s.prompts[*prompt_index]);  // Options were checked up front.
}

ConfigRun RunConfig(v1::Tandem::Stub* stub, const BenchSettings& s, const ConfigKey& key,
                    int requests) {
  ConfigRun run;
  run.key = key;
  run.results.resize(requests);
  run.prompt_index.assign(requests, 0);
  const std::string label = absl::StrFormat("%-13s %-9s pipe=%-7s c=%-3d", MethodName(key.method),
                                            AcceptanceRuleName(key.rule),
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
      [&](int number) { return MakeRequest(s, key, number, &run.prompt_index[number]); },
      [&](int number, const RequestResult& r) {
        run.results[number] = r;
        ++done;
        if (r.code != absl::StatusCode::kOk) ++failed;
        bar.Update(static_cast<double>(done) / requests,
                   absl::StrCat(done, "/", requests,
                                failed ? absl::StrCat(" (", failed, " failed)") : ""));
      },
      &g_interrupted);
  run.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  run.results.resize(done);
  run.prompt_index.resize(done);
  bar.Finish(absl::StrFormat("%s done: %d requests in %.1fs%s", label, done, run.wall_s,
                             failed ? absl::StrCat(", ", failed, " failed") : ""));
  return run;
}

absl::Status Plot(const std::string& python, const std::string& json_path,
                  const std::string& png_path) {
  char script_path[] = "/tmp/tandem-plot-XXXXXX";
  const int fd = mkstemp(script_path);
  if (fd < 0) return absl::InternalError("cannot create a temporary file for the plot script");
  const std::string script = kPlotScript;
  const bool written =
      write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
  close(fd);
  std::string log = std::string(script_path) + ".log";
  absl::Status status;
  if (!written) {
    status = absl::InternalError("cannot write the plot script");
  } else {
    ChildOptions o;
    o.binary = python;
    o.args = {script_path, json_path, png_path};
    o.log_path = log;
    o.death_signal = SIGKILL;
    auto child = ChildProcess::Spawn(o);
    if (!child.ok()) {
      status = child.status();
    } else if (!(*child)->WaitFor(absl::Seconds(120)) || (*child)->exit_code() != 0) {
      status = absl::InternalError(absl::StrCat("plotting failed (", (*child)->ExitDescription(),
                                                "): ", TailOfFile(log, 5)));
    }
  }
  unlink(script_path);
  unlink(log.c_str());
  return status;
}

absl::Status WriteJson(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out.good()) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// Resident set sizes of the server processes over a soak: at the start, the end, and
// the peak of the samples taken.
class RssTracker {
 public:
  explicit RssTracker(std::vector<pid_t> pids) : pids_(std::move(pids)) { Sample(true); }

  void Sample(bool first = false) {
    for (pid_t pid : pids_) {
      std::optional<long> kib = ResidentKib(pid);
      Rss& r = rss_[pid];
      if (!kib.has_value()) continue;
      if (first) r.start = *kib;
      r.end = *kib;
      r.max = std::max(r.max, *kib);
    }
  }

  // Prints one line per process and returns {pid: {start_kib, end_kib, max_kib}}.
  nlohmann::json PrintAndJson() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [pid, r] : rss_) {
      std::printf("  pid %d RSS: start %ld KiB, end %ld KiB, max %ld KiB\n", pid, r.start, r.end,
                  r.max);
      j[absl::StrCat(pid)] = {{"start_kib", r.start}, {"end_kib", r.end}, {"max_kib", r.max}};
    }
    return j;
  }

 private:
  struct Rss {
    long start = -1, end = -1, max = -1;
  };
  std::vector<pid_t> pids_;
  std::map<pid_t, Rss> rss_;
};

// Prints the soak summary and returns its JSON record.
nlohmann::json ReportSoak(const ConfigResult& row, absl::Time start, absl::Time end,
                          const RssTracker& rss) {
  std::printf("Soak: %s to %s (%.1f s), %s, concurrency %d\n", Iso(start).c_str(), Iso(end).c_str(),
              row.wall_s, MethodName(row.key.method).c_str(), row.key.concurrency);
  std::printf("  requests served: %d, failed: %d\n", row.ok, row.requests - row.ok);
  for (const auto& [code, count] : row.errors) std::printf("    %s: %d\n", code.c_str(), count);
  std::printf("  throughput: %.1f tok/s, %.2f req/s; latency p50/p90/p99: %s/%s/%s ms\n",
              row.throughput_tok_s, row.requests_per_s, FormatNumber(row.latency_ms.p50, 0).c_str(),
              FormatNumber(row.latency_ms.p90, 0).c_str(),
              FormatNumber(row.latency_ms.p99, 0).c_str());
  nlohmann::json rss_json = rss.PrintAndJson();
  return {{"start", Iso(start)},       {"end", Iso(end)},
          {"duration_s", row.wall_s},  {"interrupted", g_interrupted.load()},
          {"requests_served", row.ok}, {"requests_failed", row.requests - row.ok},
          {"errors", row.errors},      {"rss", rss_json},
          {"result", ToJson(row)}};
}

// --soak: one configuration at constant concurrency for a duration.
int RunSoak(v1::Tandem::Stub* stub, const BenchSettings& s, const ConfigKey& key,
            absl::Duration duration, const std::vector<pid_t>& pids, nlohmann::json report) {
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
        return MakeRequest(s, key, number, &prompt);
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
      &g_interrupted);
  const absl::Time end = absl::Now();
  rss.Sample();
  run.wall_s = absl::ToDoubleSeconds(end - start);
  ConfigResult row = Aggregate(run);
  bar.Finish("");
  report["soak"] = ReportSoak(row, start, end, rss);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (!out.empty()) {
    if (absl::Status st = WriteJson(out, report); !st.ok()) {
      Say(std::string(st.message()));
      return 1;
    }
    Say(absl::StrCat("wrote ", out));
  }
  return row.ok > 0 ? 0 : 1;
}

// Parsed command line of a benchmark run.
struct BenchArgs {
  std::vector<int> concurrency;
  std::vector<v1::SpeculationMethod> methods;
  std::vector<v1::AcceptanceRule> rules;
  std::vector<v1::Pipelining> pipelining;
  std::vector<pid_t> pids;
  int repeat = 1;
  BenchSettings settings;
};

// Fills `args` from the flags; a usage error (exit status 2) is said and returned.
absl::Status ParseBenchArgs(const Invocation& inv, BenchArgs* args) {
  if (!inv.positional.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", inv.positional[0], "' (see `tandem bench --help`)"));
  }
  auto concurrency = ParsePositiveIntList(absl::GetFlag(FLAGS_concurrency));
  if (!concurrency.ok()) return concurrency.status();
  auto methods = ParseMethodList(absl::GetFlag(FLAGS_methods));
  if (!methods.ok()) return methods.status();
  auto pipelining = ParsePipeliningList(absl::GetFlag(FLAGS_pipelining));
  if (!pipelining.ok()) return pipelining.status();
  auto rules = ParseAcceptanceRuleList(absl::GetFlag(FLAGS_rules));
  if (!rules.ok()) return rules.status();
  if (absl::GetFlag(FLAGS_requests) < 1)
    return absl::InvalidArgumentError("--requests must be >= 1");
  args->repeat = absl::GetFlag(FLAGS_repeat);
  if (args->repeat < 1) return absl::InvalidArgumentError("--repeat must be >= 1");
  for (absl::string_view p : absl::StrSplit(absl::GetFlag(FLAGS_pids), ',', absl::SkipEmpty())) {
    int pid = 0;
    if (!absl::SimpleAtoi(p, &pid) || pid <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--pids: '", p, "' is not a pid"));
    }
    args->pids.push_back(pid);
  }
  args->concurrency = *std::move(concurrency);
  args->methods = *std::move(methods);
  args->pipelining = *std::move(pipelining);
  args->rules = *std::move(rules);
  BenchSettings& s = args->settings;
  auto prompts = LoadPrompts(absl::GetFlag(FLAGS_prompts));
  if (!prompts.ok()) return prompts.status();
  s.prompts = *std::move(prompts);
  s.request.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  s.request.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  s.request.k = absl::GetFlag(FLAGS_k);
  s.request.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  s.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout));
  s.seed = absl::GetFlag(FLAGS_seed);
  return BuildRequest(s.request, "x").status();
}

// Asks the server for its model info and checks it offers every method. Returns the
// exit status on failure (1 unreachable, 2 a method it does not offer), 0 when fine.
int CheckServer(v1::Tandem::Stub* stub, const std::string& server,
                const std::vector<v1::SpeculationMethod>& methods, v1::ModelInfo* info) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  ctx.set_wait_for_ready(true);
  grpc::Status st = stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), info);
  if (!st.ok()) {
    Say(absl::StrCat("cannot reach ", server, ": ", st.error_message()));
    return 1;
  }
  for (v1::SpeculationMethod m : methods) {
    bool offered = false;
    for (int served : info->methods()) offered = offered || served == m;
    if (!offered) {
      Say(absl::StrCat("the server does not offer method '", MethodName(m), "'"));
      return 2;
    }
  }
  return 0;
}

nlohmann::json ReportHeader(const Invocation& inv, const std::string& server,
                            const v1::ModelInfo& info, const BenchArgs& args) {
  const BenchSettings& s = args.settings;
  return {
      {"tool", "tandem bench"},
      {"command_line", inv.command_line},
      {"started_at", Iso(absl::Now())},
      {"machine", MachineJson()},
      {"server", {{"address", server}, {"model_info", ProtoJson(info)}}},
      {"settings",
       {{"prompts_file", absl::GetFlag(FLAGS_prompts)},
        {"prompts", s.prompts.size()},
        {"requests", absl::GetFlag(FLAGS_requests)},
        {"repeat", args.repeat},
        {"order", "interleaved rounds, grouped by concurrency within a round"},
        {"max_tokens", s.request.max_tokens},
        {"temperature", s.request.temperature},
        {"k", s.request.k.has_value() ? nlohmann::json(*s.request.k) : nlohmann::json("adaptive")},
        {"seed", s.seed.has_value() ? nlohmann::json(*s.seed) : nlohmann::json(nullptr)},
        {"ignore_eos", s.request.ignore_eos},
        {"warmup", absl::GetFlag(FLAGS_warmup)},
        {"metrics", absl::GetFlag(FLAGS_metrics)}}},
  };
}

void Warmup(v1::Tandem::Stub* stub, const BenchSettings& s, int requests) {
  if (requests <= 0) return;
  ConfigKey warm{v1::SPECULATION_METHOD_NONE, v1::PIPELINING_DEFAULT, 1};
  LoadSpec spec;
  spec.requests = requests;
  spec.request_timeout = s.timeout;
  RunLoad(
      stub, spec,
      [&](int n) {
        int p;
        return MakeRequest(s, warm, n, &p);
      },
      [](int, const RequestResult&) {}, &g_interrupted);
}

// Every configuration in every round, interleaved (InterleavedSchedule). Appends the
// runs (for the output check) and returns one result per configuration over the
// rounds, with speedups and cost terms taken within each round.
std::vector<RepeatedResult> RunRounds(v1::Tandem::Stub* stub, const BenchSettings& s,
                                      const std::vector<ConfigKey>& configs, int repeat,
                                      std::vector<ConfigRun>* runs) {
  const std::string metrics = absl::GetFlag(FLAGS_metrics);
  std::vector<std::vector<ConfigResult>> rounds(repeat);
  for (const ScheduledRun& step : InterleavedSchedule(configs, repeat)) {
    if (g_interrupted) break;
    if (repeat > 1 && rounds[step.round].empty()) {
      Say(absl::StrCat("round ", step.round + 1, " of ", repeat));
    }
    const std::vector<PrometheusSample> before = Scrape(metrics);
    ConfigRun run = RunConfig(stub, s, configs[step.config], absl::GetFlag(FLAGS_requests));
    const std::vector<PrometheusSample> after = Scrape(metrics);
    run.round = step.round;
    ConfigResult row = Aggregate(run);
    row.busy = BusyBetween(before, after, run.wall_s);
    row.step_times = StepTimesBetween(before, after);
    rounds[step.round].push_back(row);
    runs->push_back(std::move(run));
  }
  std::vector<ConfigResult> rows;
  for (std::vector<ConfigResult>& round : rounds) {
    ComputeSpeedups(&round);
    rows.insert(rows.end(), round.begin(), round.end());
  }
  std::vector<RepeatedResult> results = GroupByConfig(configs, rows);
  // Configurations an interrupt left unmeasured are not reported.
  results.erase(std::remove_if(results.begin(), results.end(),
                               [](const RepeatedResult& r) { return r.repeats.empty(); }),
                results.end());
  return results;
}

// Prints the output check of the runs whose outputs must equal `none`'s token for token
// (greedy ones, and with --seed those of the coupled rule, or of the default rule,
// which is coupled for seeded requests); sets `*json`; returns 1 when an output differs.
int PrintOutputCheck(const std::vector<ConfigRun>& runs, const BenchSettings& s,
                     const std::vector<v1::AcceptanceRule>& rules, nlohmann::json* json) {
  const auto comparable = [&s](const ConfigKey& key) {
    if (s.request.temperature == 0) return true;
    return s.seed.has_value() &&
           (key.rule == v1::ACCEPTANCE_RULE_COUPLED || key.rule == v1::ACCEPTANCE_RULE_DEFAULT);
  };
  bool any_comparable = false;
  for (v1::AcceptanceRule rule : rules) {
    ConfigKey key;
    key.rule = rule;
    any_comparable |= comparable(key);
  }
  if (!any_comparable) {
    *json = {{"skipped",
              "sampling (temperature > 0) without --seed and rule coupled: outputs agree in "
              "distribution only"}};
    std::printf("Output check: skipped (temperature > 0 without --seed and rule coupled)\n");
    return 0;
  }
  OutputCheck check = CheckOutputsAgainstNone(runs, comparable);
  *json = ToJson(check);
  if (check.compared == 0) {
    std::printf("Output check: nothing to compare (needs `none` and another configuration)\n");
    return 0;
  }
  if (check.ok()) {
    std::printf(
        "Output check: all %d outputs identical to `none` for the same prompt "
        "(greedy, or seeded coupled sampling)\n",
        check.compared);
    return 0;
  }
  std::printf("Output check: FAILED, %zu of %d outputs differ from `none`:\n",
              check.mismatches.size(), check.compared);
  for (size_t i = 0; i < check.mismatches.size() && i < 10; ++i) {
    std::printf("  %s\n", check.mismatches[i].c_str());
  }
  return 1;
}

// --out and --plot. Returns `exit_code`, or 1 when writing or plotting failed.
int WriteOutputs(const nlohmann::json& report, int exit_code) {
  const std::string out = absl::GetFlag(FLAGS_out);
  std::string json_path = out;
  if (!out.empty()) {
    if (absl::Status st = WriteJson(out, report); !st.ok()) {
      Say(std::string(st.message()));
      return 1;
    }
    Say(absl::StrCat("wrote ", out));
  }
  const std::string plot = absl::GetFlag(FLAGS_plot);
  if (plot.empty()) return exit_code;
  std::string temp_json;
  if (json_path.empty()) {
    temp_json = absl::StrCat("/tmp/tandem-bench-", getpid(), ".json");
    if (absl::Status st = WriteJson(temp_json, report); !st.ok()) {
      Say(std::string(st.message()));
      return 1;
    }
    json_path = temp_json;
  }
  absl::Status st = Plot(absl::GetFlag(FLAGS_python), json_path, plot);
  if (!temp_json.empty()) unlink(temp_json.c_str());
  if (!st.ok()) {
    Say(absl::StrCat("no plot: ", st.message(),
                     " (needs python3-matplotlib: apt-get install python3-matplotlib)"));
    return 1;
  }
  Say(absl::StrCat("wrote ", plot));
  return exit_code;
}

int RunBench(const Invocation& inv) {
  BenchArgs args;
  if (absl::Status st = ParseBenchArgs(inv, &args); !st.ok()) {
    Say(std::string(st.message()));
    return 2;
  }
  const BenchSettings& s = args.settings;
  const std::string server = absl::GetFlag(FLAGS_server);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = ServerChannel(server);
  if (!channel.ok()) {
    Say(std::string(channel.status().message()));
    return 2;
  }
  auto stub = v1::Tandem::NewStub(*channel);
  v1::ModelInfo info;
  if (int rc = CheckServer(stub.get(), server, args.methods, &info); rc != 0) return rc;
  Say(absl::StrCat("server ", server, ": target ", info.target().name(), " (tp ",
                   info.target().tensor_parallel_size(), ", ", info.target().backend(), ")",
                   info.has_draft() ? absl::StrCat(", draft ", info.draft().name()) : ", no draft",
                   "; ", s.prompts.size(), " prompts"));
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  nlohmann::json report = ReportHeader(inv, server, info, args);
  Warmup(stub.get(), s, absl::GetFlag(FLAGS_warmup));
  if (absl::GetFlag(FLAGS_soak) > absl::ZeroDuration()) {
    ConfigKey key{args.methods[0], args.pipelining[0], args.concurrency[0], args.rules[0]};
    return RunSoak(stub.get(), s, key, absl::GetFlag(FLAGS_soak), args.pids, report);
  }
  std::vector<ConfigRun> runs;
  const std::vector<RepeatedResult> results = RunRounds(
      stub.get(), s, BenchConfigs(args.methods, args.rules, args.pipelining, args.concurrency),
      args.repeat, &runs);
  std::printf("\n%s\n%s", RenderResultsTable(results).c_str(), RenderCostTable(results).c_str());
  nlohmann::json check_json;
  int exit_code = PrintOutputCheck(runs, s, args.rules, &check_json);
  nlohmann::json results_json = nlohmann::json::array();
  for (const RepeatedResult& r : results) {
    results_json.push_back(ToJson(r));
    for (const ConfigResult& row : r.repeats) {
      if (row.ok == 0) exit_code = 1;
    }
  }
  std::fflush(stdout);
  report["results"] = results_json;
  report["output_check"] = check_json;
  report["finished_at"] = Iso(absl::Now());
  report["interrupted"] = g_interrupted.load();
  return WriteOutputs(report, exit_code);
}

}  // namespace

Command BenchCommand() {
  Command c;
  c.name = "bench";
  c.summary = "Benchmark a server: methods x rules x pipelining x concurrency, or a soak run.";
  c.usage =
      "Usage: tandem bench --server HOST:PORT [flags]\n\n"
      "Runs every configuration (method, acceptance rule, pipelining mode, concurrency)\n"
      "with --requests requests each (prompt i of the file for request i, cycling; with\n"
      "--seed S it carries seed S + i), greedy by default so outputs are comparable, and\n"
      "prints one table row per configuration: throughput\n"
      "(generated tokens/s), requests/s, time to first token and time per output token\n"
      "p50/p99 (as the client sees them), acceptance rate, mean accepted length (tokens\n"
      "per target step), speedup (throughput / `none` throughput at the same concurrency)\n"
      "and draft/target busy fractions (with --metrics). --repeat N runs N interleaved\n"
      "rounds (every configuration once per round, A B C A B C ..., grouped by\n"
      "concurrency so each run is next to its `none`); every figure is then the median\n"
      "[min-max] over the rounds and the speedup the median of the per-round ratios to\n"
      "`none` of the same round. A second table gives each speculative row's cost-model\n"
      "terms (alpha, K, and with --metrics c, nu, o) and the speedup they predict,\n"
      "S = E / (K c + nu + o), next to the measured one.\n"
      "With greedy decoding it checks that every output equals the `none` output for\n"
      "the same prompt and exits with status 1 if one differs (or a\n"
      "configuration had no successful request); with --seed the same check covers\n"
      "sampled runs of the coupled rule (or the default rule, which is coupled for\n"
      "seeded requests). `none` ignores a fixed --k.\n\n"
      "--soak DURATION runs the first method/rule/pipelining/concurrency for that long and\n"
      "reports requests served, errors by status code, latency, and (with --pids) the RSS\n"
      "of the server processes at start, end and peak. Ctrl-C ends a run early; what\n"
      "finished is reported.";
  c.flags = {
      {"server", "HOST:PORT", "Tandem server (coordinator) address."},
      {"prompts", "FILE",
       "Prompts, one per line: JSON objects with \"prompt\", JSON "
       "strings, or plain text."},
      {"concurrency", "N[,N...]", "Requests in flight at once; one run per level."},
      {"requests", "M", "Requests per configuration and round."},
      {"repeat", "N", "Interleaved rounds over all configurations (median [min-max])."},
      {"methods", "M[,M...]", "Speculation methods: none, draft, prompt_lookup, auto."},
      {"rules", "R[,R...]",
       "Acceptance rules: default, rejection, coupled, ...; one run per rule "
       "(`none` too: its sampling follows the rule)."},
      {"seed", "S", "Requests for prompt i carry seed S + i (unset: the server draws one)."},
      {"pipelining", "MODE[,MODE...]",
       "Draft/verify overlap per request: default, on, off; "
       "one run per mode (`none` runs once)."},
      {"max_tokens", "N", "Tokens to generate per request."},
      {"temperature", "T", "Sampling temperature; 0 = greedy (enables the output check)."},
      {"k", "N", "Fixed draft length K; unset = the server's adaptive K."},
      {"ignore_eos", "", "Generate exactly --max-tokens per request."},
      {"warmup", "N", "Unmeasured `none` requests before the first configuration."},
      {"metrics", "HOST:PORT",
       "Coordinator's Prometheus endpoint, for draft/target busy "
       "fractions (the growth of the draft step time, and of the "
       "verify + collective step time, over each run) and the cost "
       "terms c, nu, o."},
      {"out", "FILE", "Write all results, the command line and machine info as JSON."},
      {"plot", "FILE.png",
       "Draw throughput, speedup and acceptance vs concurrency per "
       "method (needs python3-matplotlib)."},
      {"python", "PATH", "Python interpreter used for --plot."},
      {"timeout", "SECONDS", "Deadline of each request."},
      {"soak", "DURATION", "Soak mode for this long, e.g. 30s, 10m, 2h."},
      {"pids", "PID[,PID...]", "Soak: server processes whose RSS to report."},
  };
  for (const CommandFlag& f : ConnectionFlags()) c.flags.push_back(f);
  c.run = RunBench;
  return c;
}

}  // namespace tandem::client
