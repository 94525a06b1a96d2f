#include "client/up_command.h"

#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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
#include "client/supervisor.h"
#include "client/up_flags.h"
#include "common/files.h"

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
  const int needed = 5 + c->tp;
  absl::StatusOr<std::vector<int>> free = FreePorts(c->host, needed);
  if (!free.ok()) return free.status();
  size_t next = 0;
  auto pick = [&](int configured) { return configured > 0 ? configured : (*free)[next++]; };
  ports->coordinator = pick(c->coordinator.port);
  ports->metrics = c->coordinator.metrics_port < 0 ? -1 : pick(c->coordinator.metrics_port);
  ports->openai = c->coordinator.openai_port < 0 ? -1 : pick(c->coordinator.openai_port);
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
  if (!plan.openai_endpoint.empty()) {
    absl::StrAppend(&ready, "openai=", plan.openai_endpoint, "\n");
  }
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
  if (!plan.openai_endpoint.empty()) {
    std::printf("\n  OpenAI-compatible API: http://%s/v1", plan.openai_endpoint.c_str());
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
      "openai=HOST:PORT (with --openai-port),\n"
      "pids=PID,... (coordinator first), logs=DIR, up_metrics=FILE and one line per\n"
      "process: process=NAME state=starting|serving|restarting|failed pid=P restarts=N.\n"
      "It is rewritten on every change and removed on shutdown. FILE (LOG_DIR/up.prom) is\n"
      "Prometheus text: tandem_up_restarts_total{role} and tandem_up_process_serving.";
  c.flags = UpFlagHelp();
  c.run = RunUp;
  return c;
}

}  // namespace tandem::client
