#include "client/up_flags.h"

#include <algorithm>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/restart_policy.h"
#include "client/shared_flags.h"

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
ABSL_FLAG(int, openai_port, -1, "OpenAI-compatible HTTP API port; 0 = free port; -1 = off.");
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
  if (set("openai_port")) c.coordinator.openai_port = absl::GetFlag(FLAGS_openai_port);
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

std::vector<CommandFlag> UpFlagHelp() {
  return {
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
      {"openai_port", "N",
       "OpenAI-compatible HTTP API port of the coordinator (/v1/completions, "
       "/v1/chat/completions, /v1/models, /health); 0 = a free port; -1 = off (default)."},
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
}

}  // namespace tandem::client
