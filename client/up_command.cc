#include "client/up_command.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/binary_locator.h"
#include "client/cluster_plan.h"
#include "client/cpu_set.h"
#include "client/free_port.h"
#include "client/local_cluster.h"
#include "client/restart_policy.h"
#include "client/shared_flags.h"
#include "client/supervisor.h"

ABSL_FLAG(std::string, config, "", "Cluster description (JSON).");
ABSL_FLAG(std::string, target, "models/target", "Target model directory.");
ABSL_FLAG(std::string, draft, "models/draft", "Draft model directory; none = no draft.");
ABSL_FLAG(int, tp, 4, "Target tensor-parallel ranks.");
ABSL_FLAG(std::string, backend, "cpu", "cpu or cuda.");
ABSL_FLAG(int, threads, 0, "Compute threads per worker process; 0 = cores it gets.");
ABSL_FLAG(int, kv_cache_mb, 256, "KV cache budget per worker process, MiB.");
ABSL_FLAG(bool, cpu_affinity, false, "Pin draft and target to disjoint cores.");
ABSL_FLAG(std::string, draft_cpus, "", "Cores of the draft worker (cpulist).");
ABSL_FLAG(std::string, target_cpus, "", "Cores of the target group (cpulist).");
ABSL_FLAG(std::string, log_dir, "", "Directory for the process logs.");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address every process listens on.");
ABSL_FLAG(int, port, 50051, "Public API port; 0 = a free port.");
ABSL_FLAG(int, metrics_port, 0, "Prometheus port; 0 = free port; -1 = off.");
ABSL_FLAG(int, max_k, 8, "Largest draft length K.");
ABSL_FLAG(std::string, ready_file, "", "Written with the endpoint once healthy.");
ABSL_FLAG(double, startup_timeout, 300, "Seconds to become healthy.");
ABSL_FLAG(std::string, coordinator_bin, "", "Path of tandem-coordinator.");
ABSL_FLAG(std::string, worker_bin, "", "Path of tandem-worker.");
ABSL_FLAG(bool, dry_run, false, "Print the plan and exit.");
ABSL_FLAG(std::string, restart, "always", "Restart policy: never, workers or always.");
ABSL_FLAG(int, restart_budget, 5, "Restarts allowed per process within --restart-window.");
ABSL_FLAG(double, restart_window, 60, "Seconds of the restart budget's sliding window.");
ABSL_FLAG(double, restart_backoff, 0.5, "Seconds before the first restart in a window.");

namespace tandem::client {
namespace {

// LOG_DIR/up.log once OpenUpLog ran: every line Say prints, with a UTC time stamp.
std::FILE* up_log = nullptr;

void OpenUpLog(const std::string& path) {
  if (up_log == nullptr) up_log = std::fopen(path.c_str(), "a");
}

// One line on stderr and in up.log.
void Say(const std::string& line) {
  std::fprintf(stderr, "tandem up: %s\n", line.c_str());
  std::fflush(stderr);
  if (up_log != nullptr) {
    std::fprintf(up_log, "%s %s\n",
                 absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()).c_str(),
                 line.c_str());
    std::fflush(up_log);
  }
}

// Writes `text` to `path` atomically (temp file + rename).
absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temp);
    out << text;
    if (!out.good()) return absl::PermissionDeniedError(absl::StrCat("cannot write ", temp));
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot rename ", temp, " to ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status MakeDirectories(const std::string& path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      partial = path.substr(0, i);
      if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::PermissionDeniedError(
            absl::StrCat("cannot create directory ", partial, ": ", strerror(errno)));
      }
    }
  }
  return absl::OkStatus();
}

// Signals `up` reacts to; blocked in every thread and consumed by sigtimedwait.
sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

// Sleeps up to `d`; returns the stop signal that arrived, or 0.
int WaitForStopSignal(absl::Duration d) {
  const sigset_t set = StopSignals();
  timespec ts = absl::ToTimespec(d);
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

absl::Status ResolvePorts(ClusterConfig* c, ClusterPorts* ports) {
  const int needed = 4 + c->tp;
  absl::StatusOr<std::vector<int>> free = FreePorts(c->host, needed);
  if (!free.ok()) return free.status();
  size_t next = 0;
  auto pick = [&](int configured) { return configured > 0 ? configured : (*free)[next++]; };
  ports->coordinator = pick(c->coordinator.port);
  ports->metrics = c->coordinator.metrics_port < 0 ? -1 : pick(c->coordinator.metrics_port);
  ports->rendezvous = pick(c->coordinator.rendezvous_port);
  ports->draft = (*free)[next++];
  for (int r = 0; r < c->tp; ++r) ports->target.push_back((*free)[next++]);
  return absl::OkStatus();
}

// The ready file: endpoint, metrics, current pids, logs, the metrics textfile, then
// one line per process with its state.
std::string ReadyFileText(const ClusterPlan& plan, const std::string& log_dir,
                          const std::vector<ProcessStatus>& status) {
  std::string ready = absl::StrCat(plan.endpoint, "\n");
  if (!plan.metrics_endpoint.empty())
    absl::StrAppend(&ready, "metrics=", plan.metrics_endpoint, "\n");
  std::vector<std::string> pids;
  for (const ProcessStatus& p : status) pids.push_back(absl::StrCat(p.pid));
  absl::StrAppend(&ready, "pids=", absl::StrJoin(pids, ","), "\n", "logs=", log_dir, "\n",
                  "up_metrics=", log_dir, "/up.prom\n", FormatProcessLines(status));
  return ready;
}

void PrintBanner(const ClusterPlan& plan) {
  std::printf("Tandem is serving on %s", plan.endpoint.c_str());
  if (!plan.metrics_endpoint.empty()) {
    std::printf(" (metrics: http://%s/metrics)", plan.metrics_endpoint.c_str());
  }
  std::printf("\n  try: tandem generate --server %s \"def fib(n):\"\nPress Ctrl-C to stop.\n",
              plan.endpoint.c_str());
  std::fflush(stdout);
}

// Runs the supervision loop until a stop signal (0; 130 before the cluster was ready),
// a process the policy does not restart, or a start-up timeout (1). Keeps LOG_DIR/up.prom
// and, once ready, the ready file up to date.
int Supervise(LocalCluster& cluster, const ClusterConfig& config, const ClusterPlan& plan,
              const std::string& log_dir, const std::string& ready_file) {
  Supervisor supervisor(&cluster, config.restart, [](const std::string& line) { Say(line); });
  const absl::Time start_deadline = absl::Now() + absl::Seconds(config.startup_timeout_s);
  bool ready = false;
  while (true) {
    absl::Status step = supervisor.Step(absl::Now());
    if (!step.ok()) {
      Say(absl::StrCat(ready ? "giving up: " : "cluster failed to start: ", step.message()));
      Say("stopping the other processes");
      return 1;
    }
    if (!ready && supervisor.AllServing()) {
      ready = true;
      PrintBanner(plan);
    } else if (!ready && absl::Now() >= start_deadline) {
      Say(absl::StrCat("cluster failed to start: not healthy after ",
                       absl::FormatDuration(absl::Seconds(config.startup_timeout_s)), ": ",
                       absl::StrJoin(supervisor.NotServing(), ", ")));
      Say("stopping the other processes");
      return 1;
    }
    if (supervisor.TakeChanged()) {
      const std::vector<ProcessStatus> status = supervisor.Status();
      absl::Status written =
          WriteFileAtomically(log_dir + "/up.prom", FormatSupervisorMetrics(status));
      if (written.ok() && ready && !ready_file.empty()) {
        written = WriteFileAtomically(ready_file, ReadyFileText(plan, log_dir, status));
      }
      if (!written.ok()) {
        Say(std::string(written.message()));
        return 1;
      }
    }
    if (const int sig = WaitForStopSignal(absl::Milliseconds(250)); sig != 0) {
      Say(absl::StrCat("got ", strsignal(sig),
                       ready ? "; stopping the cluster" : " while starting; stopping"));
      return ready ? 0 : 130;
    }
  }
}

int RunUp(const Invocation& inv) {
  if (!inv.positional.empty()) {
    Say(absl::StrCat("unexpected argument '", inv.positional[0], "' (see `tandem up --help`)"));
    return 2;
  }
  // Block the stop signals before any thread exists, so every thread inherits the mask
  // and only sigtimedwait below sees them. Children get a clean mask.
  const sigset_t stop_signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<ClusterConfig> config = ConfigFromFlags(inv.specified);
  if (!config.ok()) {
    Say(std::string(config.status().message()));
    return 2;
  }
  std::string coordinator_bin = absl::GetFlag(FLAGS_coordinator_bin);
  std::string worker_bin = absl::GetFlag(FLAGS_worker_bin);
  for (auto [path, package, name] : {std::tuple<std::string*, const char*, const char*>{
                                         &coordinator_bin, "coordinator", "tandem-coordinator"},
                                     {&worker_bin, "worker", "tandem-worker"}}) {
    if (!path->empty()) continue;
    absl::StatusOr<std::string> found = FindBinary(package, name);
    if (!found.ok()) {
      Say(std::string(found.status().message()));
      return 2;
    }
    *path = *found;
  }
  std::string log_dir = config->log_dir;
  if (log_dir.empty()) {
    char pattern[] = "/tmp/tandem-up-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
      Say(absl::StrCat("cannot create a log directory: ", strerror(errno)));
      return 1;
    }
    log_dir = pattern;
  } else if (absl::Status s = MakeDirectories(log_dir); !s.ok()) {
    Say(std::string(s.message()));
    return 1;
  }
  ClusterPorts ports;
  if (absl::Status s = ResolvePorts(&*config, &ports); !s.ok()) {
    Say(std::string(s.message()));
    return 1;
  }
  const std::string run_id = absl::StrCat("up-", getpid(), "-", absl::ToUnixMillis(absl::Now()));
  absl::StatusOr<ClusterPlan> plan =
      PlanCluster(*config, ports, coordinator_bin, worker_bin, run_id, log_dir, AllowedCpus());
  if (!plan.ok()) {
    Say(std::string(plan.status().message()));
    return 2;
  }
  if (absl::GetFlag(FLAGS_dry_run)) {
    std::printf("# cluster description\n%s\n# processes\n", ClusterConfigToJson(*config).c_str());
    for (const ProcessSpec& p : plan->processes) {
      std::printf("%s: %s > %s 2>&1\n", p.name.c_str(), CommandLineOf(p).c_str(),
                  p.log_path.c_str());
    }
    return 0;
  }

  const std::string ready_file = absl::GetFlag(FLAGS_ready_file);
  if (!ready_file.empty()) unlink(ready_file.c_str());
  OpenUpLog(log_dir + "/up.log");
  Say(absl::StrCat("starting ", plan->processes.size(), " processes (target tp=", config->tp,
                   config->with_draft ? ", draft" : ", no draft",
                   config->cpu_affinity ? ", pinned" : "",
                   ", restart=", RestartModeName(config->restart.mode), "); logs in ", log_dir));
  for (const ProcessSpec& p : plan->processes) {
    Say(absl::StrCat("  ", p.name, ": ", CommandLineOf(p)));
  }
  LocalClusterOptions options;
  options.note = [](const std::string& line) { Say(line); };
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
      LocalCluster::Start(plan->processes, options);
  if (!cluster.ok()) {
    Say(std::string(cluster.status().message()));
    return 1;
  }
  for (size_t i = 0; i < (*cluster)->size(); ++i) {
    Say(absl::StrCat("started ", (*cluster)->name(i), " (pid ", (*cluster)->pid(i), ")"));
  }
  const int exit_code = Supervise(**cluster, *config, *plan, log_dir, ready_file);
  if (!ready_file.empty()) unlink(ready_file.c_str());
  (*cluster)->Stop();
  Say("stopped");
  return exit_code;
}

}  // namespace

absl::StatusOr<ClusterConfig> ConfigFromFlags(const std::set<std::string>& given) {
  ClusterConfig c;
  if (!absl::GetFlag(FLAGS_config).empty()) {
    absl::StatusOr<ClusterConfig> loaded = LoadClusterConfig(absl::GetFlag(FLAGS_config));
    if (!loaded.ok()) return loaded.status();
    c = *std::move(loaded);
  }
  auto set = [&given](const char* name) { return given.count(name) > 0; };
  if (set("target")) c.target.model = absl::GetFlag(FLAGS_target);
  if (set("draft")) {
    const std::string draft = absl::GetFlag(FLAGS_draft);
    c.with_draft = draft != "none" && !draft.empty();
    if (c.with_draft) c.draft.model = draft;
  }
  if (set("tp")) c.tp = absl::GetFlag(FLAGS_tp);
  if (set("backend")) {
    c.target.backend = c.draft.backend = absl::GetFlag(FLAGS_backend);
    if (c.target.backend == "cuda" && (c.comm == "tcp" || c.comm == "gloo")) c.comm = "nccl";
  }
  if (set("threads")) c.target.threads = c.draft.threads = absl::GetFlag(FLAGS_threads);
  if (set("kv_cache_mb"))
    c.target.kv_cache_mb = c.draft.kv_cache_mb = absl::GetFlag(FLAGS_kv_cache_mb);
  if (set("cpu_affinity")) c.cpu_affinity = absl::GetFlag(FLAGS_cpu_affinity);
  if (set("draft_cpus")) c.draft_cpus = absl::GetFlag(FLAGS_draft_cpus);
  if (set("target_cpus")) c.target_cpus = absl::GetFlag(FLAGS_target_cpus);
  if ((set("draft_cpus") || set("target_cpus")) && !set("cpu_affinity")) c.cpu_affinity = true;
  if (set("log_dir")) c.log_dir = absl::GetFlag(FLAGS_log_dir);
  if (set("host")) c.host = absl::GetFlag(FLAGS_host);
  if (set("port")) c.coordinator.port = absl::GetFlag(FLAGS_port);
  if (set("metrics_port")) c.coordinator.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (set("max_k")) c.coordinator.max_k = absl::GetFlag(FLAGS_max_k);
  if (set("startup_timeout")) c.startup_timeout_s = absl::GetFlag(FLAGS_startup_timeout);
  if (set("pipelining")) {
    const std::string p = absl::GetFlag(FLAGS_pipelining);
    if (p != "on" && p != "off" && p != "default") {
      return absl::InvalidArgumentError(
          absl::StrCat("--pipelining must be on, off or default, got '", p, "'"));
    }
    if (p != "default") c.coordinator.pipelining = p == "on";
  }
  if (set("restart")) {
    absl::StatusOr<RestartMode> mode = ParseRestartMode(absl::GetFlag(FLAGS_restart));
    if (!mode.ok())
      return absl::InvalidArgumentError(absl::StrCat("--restart: ", mode.status().message()));
    c.restart.mode = *mode;
  }
  if (set("restart_budget")) c.restart.budget = absl::GetFlag(FLAGS_restart_budget);
  if (set("restart_window")) c.restart.window = absl::Seconds(absl::GetFlag(FLAGS_restart_window));
  if (set("restart_backoff")) {
    c.restart.backoff = absl::Seconds(absl::GetFlag(FLAGS_restart_backoff));
    c.restart.max_backoff = std::max(c.restart.max_backoff, c.restart.backoff);
  }
  if (absl::Status s = ValidateClusterConfig(c); !s.ok()) return s;
  return c;
}

Command UpCommand() {
  Command c;
  c.name = "up";
  c.summary = "Start a local cluster (coordinator, draft worker, target group).";
  c.usage =
      "Usage: tandem up [flags]\n\n"
      "Starts a Tandem cluster as local processes: the coordinator, a draft worker and a\n"
      "target group of --tp ranks (tensor parallel, tcp collectives over loopback,\n"
      "rendezvous through the coordinator). Workers listen on free ports. Waits until\n"
      "every process reports healthy (grpc.health.v1), prints the endpoint, writes\n"
      "--ready-file, and runs until Ctrl-C or SIGTERM, then stops everything. Each\n"
      "process logs to LOG_DIR/NAME.log, `up` itself to stderr and LOG_DIR/up.log.\n\n"
      "A process that dies is restarted (--restart always, the default; `workers` leaves\n"
      "a dead coordinator alone, `never` stops at the first death) after a backoff that\n"
      "starts at --restart-backoff and doubles with each restart within --restart-window,\n"
      "up to --restart-budget restarts per process per window. Each death and restart is\n"
      "reported (process, exit status or signal, restart count). A restarted coordinator\n"
      "loses the requests it was running (their clients get UNAVAILABLE); workers are\n"
      "re-adopted and requests in flight pause and resume. When a death is not to be\n"
      "restarted, `up` names the process with the end of its log, stops the rest and\n"
      "exits with status 1. No process outlives `up`, even if it is killed (the children\n"
      "get a parent-death signal).\n\n"
      "A JSON --config file describes the same cluster (see client/README.md); flags\n"
      "given on the command line override its values.\n\n"
      "Ready file: line 1 is the endpoint (HOST:PORT); then metrics=HOST:PORT,\n"
      "pids=PID,... (coordinator first), logs=DIR, up_metrics=FILE and one line per\n"
      "process: process=NAME state=starting|serving|restarting|failed pid=P restarts=N.\n"
      "It is rewritten on every change and removed on shutdown. FILE (LOG_DIR/up.prom) is\n"
      "Prometheus text: tandem_up_restarts_total{role} and tandem_up_process_serving.";
  c.flags = {
      {"config", "FILE", "Cluster description (JSON); flags override its values."},
      {"target", "DIR", "Target model directory (Hugging Face layout)."},
      {"draft", "DIR", "Draft model directory; `none` starts no draft worker."},
      {"tp", "N", "Target tensor-parallel ranks (processes)."},
      {"backend", "B", "Compute backend of the workers: cpu or cuda."},
      {"threads", "N",
       "Compute threads per worker process; 0 = the cores it gets (pinned), "
       "or all cores split between the ranks."},
      {"kv_cache_mb", "MB", "KV cache budget per worker process."},
      {"cpu_affinity", "",
       "Pin the draft worker and the target group to disjoint cores "
       "(2 cores: draft on core 0, every target rank on core 1); the "
       "coordinator is not pinned."},
      {"draft_cpus", "LIST",
       "Cores of the draft worker, e.g. 0 or 0-1 (implies "
       "--cpu-affinity; give --target-cpus too)."},
      {"target_cpus", "LIST", "Cores of the target group, e.g. 1-3."},
      {"log_dir", "DIR",
       "Directory of the process logs; default: a new /tmp/tandem-up-* "
       "directory."},
      {"host", "ADDR", "IPv4 address every process listens on."},
      {"port", "N", "Public API port; 0 = a free port."},
      {"metrics_port", "N",
       "Prometheus /metrics port of the coordinator; 0 = a free port; "
       "-1 = off."},
      {"max_k", "N", "Largest draft length K (coordinator)."},
      {"pipelining", "MODE", "Coordinator's draft/verify overlap: on, off, or default (on)."},
      {"ready_file", "PATH", "Write the endpoint (and metrics, pids, logs) here once healthy."},
      {"startup_timeout", "SECONDS", "Give up if the cluster is not healthy by then."},
      {"coordinator_bin", "PATH",
       "tandem-coordinator to run; default: found next to this "
       "program, in the Bazel tree, or on PATH."},
      {"worker_bin", "PATH", "tandem-worker to run (found like --coordinator-bin)."},
      {"dry_run", "", "Print the cluster description and command lines, start nothing."},
      {"restart", "POLICY",
       "What to do when a process dies: always (restart it, the default), workers (not the "
       "coordinator), never (stop the cluster)."},
      {"restart_budget", "N", "Restarts allowed per process within the window; then give up."},
      {"restart_window", "SECONDS", "Sliding window of the restart budget."},
      {"restart_backoff", "SECONDS",
       "Delay of the first restart in a window; doubles with each further one (max 10 s)."},
  };
  c.run = RunUp;
  return c;
}

}  // namespace tandem::client
