#include "client/bench_command.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/bench_baseline.h"
#include "client/bench_output.h"
#include "client/bench_repeats.h"
#include "client/bench_report.h"
#include "client/bench_rounds.h"
#include "client/bench_run.h"
#include "client/bench_schedule.h"
#include "client/bench_soak.h"
#include "client/machine_info.h"
#include "client/model_info_text.h"
#include "client/prompts.h"
#include "client/request_options.h"
#include "client/server_channel.h"
#include "client/shared_flags.h"

ABSL_FLAG(std::string, prompts, "bench/prompts/code_completion.jsonl", "Prompts file.");
ABSL_FLAG(std::string, concurrency, "1", "Concurrency levels.");
ABSL_FLAG(int, requests, 8, "Requests per configuration.");
ABSL_FLAG(int, repeat, 1, "Interleaved rounds over all configurations.");
ABSL_FLAG(int, chunks, 1, "Chunks each configuration's requests of a round are run in.");
ABSL_FLAG(bool, aa_control, false, "Add an A/A control of `none` to every round.");
ABSL_FLAG(std::string, methods, "none,draft", "Methods to compare.");
ABSL_FLAG(std::string, lookahead, "", "Lookahead W,N,G for lookahead rows.");
ABSL_FLAG(std::string, tree_nodes, "",
          "Dynamic draft tree node budgets for draft rows (0 = chains, server).");
ABSL_FLAG(std::string, rules, "default", "Acceptance rules to compare.");
ABSL_FLAG(std::string, out, "", "JSON results file.");
ABSL_FLAG(std::string, plot, "", "PNG plot file.");
ABSL_FLAG(std::string, metrics, "", "Coordinator metrics address.");
ABSL_FLAG(int, warmup, 1, "Unmeasured requests first.");
ABSL_FLAG(absl::Duration, soak, absl::ZeroDuration(), "Soak duration.");
ABSL_FLAG(std::string, pids, "", "Server process ids for RSS.");
ABSL_FLAG(std::string, baseline_server, "", "Plain-decoding baseline server.");
ABSL_FLAG(std::string, python, "/usr/bin/python3", "Python with matplotlib.");

namespace tandem::client {
namespace {

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted = true; }

nlohmann::json MachineJson() {
  MachineInfo m = GetMachineInfo();
  return {{"hostname", m.hostname},         {"kernel", m.kernel},
          {"cpu_model", m.cpu_model},       {"online_cpus", m.online_cpus},
          {"allowed_cpus", m.allowed_cpus}, {"memory_gib", m.memory_gib}};
}

nlohmann::json InfoJson(const v1::ModelInfo& info) {
  return nlohmann::json::parse(ModelInfoJson(info), nullptr, false);
}

// Parsed command line of a benchmark run.
struct BenchArgs {
  std::vector<int> concurrency;
  std::vector<v1::SpeculationMethod> methods;
  std::vector<v1::AcceptanceRule> rules;
  std::vector<v1::Pipelining> pipelining;
  std::vector<pid_t> pids;
  int repeat = 1;
  bool aa_control = false;  // --aa-control: an A/A control of `none` in every round.
  // --tree-nodes with several budgets: one draft row per budget (else empty).
  std::vector<int> draft_tree_nodes;
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
  const int chunks = absl::GetFlag(FLAGS_chunks);
  const int requests = absl::GetFlag(FLAGS_requests);
  const int widest = *std::max_element(concurrency->begin(), concurrency->end());
  if (chunks < 1 || (chunks > 1 && requests / chunks < widest)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--chunks must be >= 1 and leave each chunk at least the largest --concurrency (", widest,
        ") requests: --requests ", requests, " / --chunks ", chunks, " leaves ",
        chunks >= 1 ? requests / chunks : 0));
  }
  args->aa_control = absl::GetFlag(FLAGS_aa_control);
  if (args->aa_control &&
      std::find(methods->begin(), methods->end(), v1::SPECULATION_METHOD_NONE) == methods->end()) {
    return absl::InvalidArgumentError("--aa-control needs `none` in --methods");
  }
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
  s.request.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature).value_or(0));
  s.request.k = absl::GetFlag(FLAGS_k);
  s.request.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  if (!absl::GetFlag(FLAGS_tree_nodes).empty()) {
    auto trees = ParseTreeNodesList(absl::GetFlag(FLAGS_tree_nodes));
    if (!trees.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--tree-nodes: ", trees.status().message()));
    }
    // One budget applies to every draft row; several make one draft row each.
    if (trees->size() == 1 && trees->front() != kServerTreeNodes) {
      s.request.tree_nodes = trees->front();
    } else if (trees->size() > 1) {
      args->draft_tree_nodes = *std::move(trees);
    }
  }
  absl::Status lookahead = ParseLookahead(absl::GetFlag(FLAGS_lookahead), &s.request);
  if (!lookahead.ok()) return lookahead;
  s.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout));
  s.seed = absl::GetFlag(FLAGS_seed);
  return BuildRequest(s.request, "x").status();
}

nlohmann::json ReportHeader(const Invocation& inv, const std::string& server,
                            const v1::ModelInfo& info, const BenchArgs& args) {
  const BenchSettings& s = args.settings;
  return {
      {"tool", "tandem bench"},
      {"command_line", inv.command_line},
      {"started_at", IsoTime(absl::Now())},
      {"machine", MachineJson()},
      {"server", {{"address", server}, {"model_info", InfoJson(info)}}},
      {"settings",
       {{"prompts_file", absl::GetFlag(FLAGS_prompts)},
        {"prompts", s.prompts.size()},
        {"requests", absl::GetFlag(FLAGS_requests)},
        {"repeat", args.repeat},
        {"aa_control", args.aa_control},
        {"chunks", absl::GetFlag(FLAGS_chunks)},
        {"order", "interleaved rounds, grouped by concurrency within a round, chunk by chunk"},
        {"max_tokens", s.request.max_tokens},
        {"temperature", s.request.temperature.value_or(0)},
        {"k", s.request.k.has_value() ? nlohmann::json(*s.request.k) : nlohmann::json("adaptive")},
        {"tree_nodes", !args.draft_tree_nodes.empty()     ? nlohmann::json(args.draft_tree_nodes)
                       : s.request.tree_nodes.has_value() ? nlohmann::json(*s.request.tree_nodes)
                                                          : nlohmann::json("server")},
        {"seed", s.seed.has_value() ? nlohmann::json(*s.seed) : nlohmann::json(nullptr)},
        {"ignore_eos", s.request.ignore_eos},
        {"warmup", absl::GetFlag(FLAGS_warmup)},
        {"metrics", absl::GetFlag(FLAGS_metrics)}}},
  };
}

int RunBench(const Invocation& inv) {
  BenchArgs args;
  if (absl::Status st = ParseBenchArgs(inv, &args); !st.ok()) {
    BenchSay(std::string(st.message()));
    return 2;
  }
  const BenchSettings& s = args.settings;
  const std::string server = absl::GetFlag(FLAGS_server);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = ServerChannel(server);
  if (!channel.ok()) {
    BenchSay(std::string(channel.status().message()));
    return 2;
  }
  auto stub = v1::Tandem::NewStub(*channel);
  v1::ModelInfo info;
  if (int rc = CheckServer(stub.get(), server, args.methods, &info); rc != 0) return rc;
  BenchSay(
      absl::StrCat("server ", server, ": target ", info.target().name(), " (tp ",
                   info.target().tensor_parallel_size(), ", ", info.target().backend(), ")",
                   info.has_draft() ? absl::StrCat(", draft ", info.draft().name()) : ", no draft",
                   "; ", s.prompts.size(), " prompts"));
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  nlohmann::json report = ReportHeader(inv, server, info, args);
  Warmup(stub.get(), s, absl::GetFlag(FLAGS_warmup), &g_interrupted);
  const OutputFiles files{absl::GetFlag(FLAGS_out), absl::GetFlag(FLAGS_plot),
                          absl::GetFlag(FLAGS_python)};
  if (absl::GetFlag(FLAGS_soak) > absl::ZeroDuration()) {
    ConfigKey key{args.methods[0], args.pipelining[0], args.concurrency[0], args.rules[0]};
    const SoakResult soak =
        RunSoak(stub.get(), s, key, absl::GetFlag(FLAGS_soak), args.pids, &g_interrupted);
    report["soak"] = soak.report;
    const int written = WriteOutputs(report, {files.json, "", ""}, 0);
    return written != 0 ? written : soak.ok ? 0 : 1;
  }
  const std::string baseline_server = absl::GetFlag(FLAGS_baseline_server);
  std::unique_ptr<v1::Tandem::Stub> baseline;
  v1::ModelInfo baseline_info;
  if (!baseline_server.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> bc = ServerChannel(baseline_server);
    if (!bc.ok()) {
      BenchSay(absl::StrCat("--baseline_server: ", bc.status().message()));
      return 2;
    }
    baseline = v1::Tandem::NewStub(*bc);
    if (int rc = CheckServer(baseline.get(), baseline_server, {}, &baseline_info); rc != 0)
      return rc;
    report["baseline_server"] = {{"address", baseline_server},
                                 {"model_info", InfoJson(baseline_info)}};
    Warmup(baseline.get(), s, absl::GetFlag(FLAGS_warmup), &g_interrupted);
  }
  std::vector<ConfigRun> runs;
  std::vector<ConfigResult> baseline_rows;
  const std::vector<RepeatedResult> results =
      RunRounds(stub.get(), s,
                BenchConfigs(args.methods, args.rules, args.pipelining, args.concurrency,
                             args.aa_control, args.draft_tree_nodes),
                RoundsSpec{args.repeat, absl::GetFlag(FLAGS_requests), absl::GetFlag(FLAGS_chunks),
                           absl::GetFlag(FLAGS_metrics)},
                &g_interrupted, &runs, baseline.get(), &baseline_rows);
  std::printf("\n%s\n%s", RenderResultsTable(results).c_str(), RenderCostTable(results).c_str());
  if (baseline != nullptr) {
    const std::vector<BaselineComparison> compared = CompareWithBaseline(baseline_rows, results);
    const std::string label =
        absl::StrCat(baseline_server, ": ", baseline_info.target().name(), " at tp ",
                     baseline_info.target().tensor_parallel_size(), ", none");
    std::printf("\n%s", RenderBaselineTable(label, compared).c_str());
    for (const BaselineComparison& c : compared) report["baseline"].push_back(ToJson(c));
  }
  nlohmann::json check_json;
  int exit_code = PrintOutputCheck(runs, s, args.rules, &check_json);
  for (const RepeatedResult& r : results) {
    for (const ConfigResult& row : r.repeats) {
      if (row.ok == 0) exit_code = 1;
    }
  }
  std::fflush(stdout);
  report["results"] = ResultsJson(results);
  report["output_check"] = check_json;
  report["finished_at"] = IsoTime(absl::Now());
  report["interrupted"] = g_interrupted.load();
  return WriteOutputs(report, files, exit_code);
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
      "rounds (every configuration once per round, A B C C B A ..., grouped by\n"
      "concurrency so each run is next to its `none`); every figure is then the median\n"
      "[min-max] over the rounds and the speedup the median of the per-round ratios to\n"
      "`none` of the same round. A second table gives each speculative row's cost-model\n"
      "terms (alpha, K, and with --metrics c, nu, o) and the speedup they predict,\n"
      "S = E / (K c + nu + o), next to the measured one.\n"
      "--aa-control adds `none (A/A)`: plain decoding measured exactly like `none`\n"
      "(same requests, interleaved) but never a baseline, so its speedup over `none` is\n"
      "the run's noise floor; each speculative row's `vs A/A` then reads faster (its\n"
      "smallest per-round speedup above the control's largest), slower (its largest\n"
      "below the control's smallest) or within noise (needs --repeat >= 3).\n"
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
      {"chunks", "N",
       "Split each configuration's --requests of a round into N chunks run chunk by chunk "
       "across the configurations of a concurrency level (A1 B1 C1 C2 B2 A2 ...), so slow "
       "drift of a shared machine cancels in the ratios; each chunk needs at least the "
       "concurrency in requests."},
      {"aa_control", "",
       "A/A control: `none` measured twice per round, the second (`none (A/A)`) never a "
       "baseline; speculative rows get a verdict against its ratios (needs `none`)."},
      {"methods", "M[,M...]",
       "Speculation methods: none, draft, prompt_lookup, lookahead, auto (also medusa where the "
       "target has heads)."},
      {"lookahead", "W,N,G", "Lookahead's window, n-gram length, guesses (unset: server's)."},
      {"tree_nodes", "N[,N...]",
       "Draft rows: the dynamic draft tree's node budget per step, used whole (0 = chains; "
       "server or unset: the server's --draft_tree_nodes, priced per node). Several "
       "budgets (e.g. server,0) make one draft row each, `draft tree=N`, measured in the "
       "same rounds."},
      {"rules", "R[,R...]",
       "Acceptance rules: default, rejection, coupled, ...; one run per rule "
       "(`none` too: its sampling follows the rule)."},
      {"seed", "S", "Requests for prompt i carry seed S + i (unset: the server draws one)."},
      {"pipelining", "MODE[,MODE...]",
       "Draft/verify overlap per request: default, on, off; "
       "one run per mode (`none` runs once)."},
      {"max_tokens", "N", "Tokens to generate per request."},
      {"temperature", "T", "Temperature, always sent; 0 = greedy (enables the output check)."},
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
      {"baseline_server", "HOST:PORT",
       "A second server (e.g. `tandem up --target T --tp 1`, no draft) whose plain decoding "
       "runs at every concurrency level after each round; printed as ratios to it."},
      {"timeout", "SECONDS", "Deadline of each request."},
      {"soak", "DURATION", "Soak mode for this long, e.g. 30s, 10m, 2h."},
      {"pids", "PID[,PID...]", "Soak: server processes whose RSS to report."},
  };
  for (const CommandFlag& f : ConnectionFlags()) c.flags.push_back(f);
  c.run = RunBench;
  return c;
}

}  // namespace tandem::client
