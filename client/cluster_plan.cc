#include "client/cluster_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/cpu_set.h"

namespace tandem::client {
namespace {

std::string Address(const std::string& host, int port) { return absl::StrCat(host, ":", port); }

// Threads for a process owning `cores` cores shared by `sharers` processes.
int DefaultThreads(int configured, size_t cores, int sharers) {
  if (configured > 0) return configured;
  return std::max<int>(1, static_cast<int>(cores) / std::max(1, sharers));
}

std::string Quote(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

absl::StatusOr<ClusterPlan> PlanCluster(const ClusterConfig& c, const ClusterPorts& ports,
                                        const std::string& coordinator_binary,
                                        const std::string& worker_binary, const std::string& run_id,
                                        const std::string& log_dir,
                                        const std::vector<int>& allowed_cpus) {
  if (absl::Status s = ValidateClusterConfig(c); !s.ok()) return s;
  if (static_cast<int>(ports.target.size()) != c.tp || ports.coordinator <= 0 ||
      ports.rendezvous <= 0 || (c.with_draft && ports.draft <= 0) || ports.metrics == 0 ||
      ports.openai == 0) {
    return absl::InvalidArgumentError("PlanCluster: every port must be chosen (non-zero)");
  }
  for (int p : ports.target) {
    if (p <= 0) return absl::InvalidArgumentError("PlanCluster: target rank port is 0");
  }

  AffinityPlan affinity;
  if (c.cpu_affinity) {
    absl::StatusOr<AffinityPlan> planned;
    if (!c.draft_cpus.empty()) {
      planned = PlanAffinityFrom(*ParseCpuList(c.draft_cpus), *ParseCpuList(c.target_cpus), c.tp);
    } else {
      planned = PlanAffinity(allowed_cpus, c.tp);
    }
    if (!planned.ok()) return planned.status();
    affinity = *std::move(planned);
  }
  const size_t all_cores = std::max<size_t>(1, allowed_cpus.size());

  ClusterPlan plan;
  plan.run_id = run_id;
  plan.endpoint = Address(c.host, ports.coordinator);
  if (ports.metrics > 0) plan.metrics_endpoint = Address(c.host, ports.metrics);
  if (ports.openai > 0) plan.openai_endpoint = Address(c.host, ports.openai);
  const std::string rendezvous = Address(c.host, ports.rendezvous);

  ProcessSpec coordinator;
  coordinator.name = "coordinator";
  coordinator.binary = coordinator_binary;
  coordinator.health_address = plan.endpoint;
  coordinator.log_path = log_dir + "/coordinator.log";
  coordinator.args = {
      "--listen=" + plan.endpoint,
      "--target=" + Address(c.host, ports.target[0]),
      "--tokenizer=" + c.target.model,
      "--rendezvous_listen=" + rendezvous,
      absl::StrCat("--pipelining=", c.coordinator.pipelining ? "true" : "false"),
      absl::StrCat("--max_k=", c.coordinator.max_k),
      absl::StrCat("--max_running=", c.coordinator.max_running),
      absl::StrCat("--max_queue=", c.coordinator.max_queue),
      absl::StrCat("--worker_wait_s=", c.startup_timeout_s),
  };
  if (c.with_draft) coordinator.args.push_back("--draft=" + Address(c.host, ports.draft));
  if (!plan.metrics_endpoint.empty()) {
    coordinator.args.push_back("--metrics_listen=" + plan.metrics_endpoint);
  }
  if (!plan.openai_endpoint.empty()) {
    coordinator.args.push_back("--openai_listen=" + plan.openai_endpoint);
  }
  coordinator.args.insert(coordinator.args.end(), c.coordinator.args.begin(),
                          c.coordinator.args.end());
  plan.processes.push_back(coordinator);

  for (int r = 0; r < c.tp; ++r) {
    ProcessSpec rank;
    rank.name = absl::StrCat("target-", r);
    rank.binary = worker_binary;
    rank.health_address = Address(c.host, ports.target[r]);
    rank.log_path = absl::StrCat(log_dir, "/target-", r, ".log");
    rank.stop_stage = r == 0 ? 1 : 2;
    int threads;
    if (c.cpu_affinity) {
      rank.cpus = affinity.target_ranks[r];
      const int sharers = static_cast<int>(
          std::count(affinity.target_ranks.begin(), affinity.target_ranks.end(), rank.cpus));
      threads = DefaultThreads(c.target.threads, rank.cpus.size(), sharers);
    } else {
      threads = DefaultThreads(c.target.threads, all_cores, c.tp);
    }
    rank.args = {
        "--role=target",
        absl::StrCat("--rank=", r),
        absl::StrCat("--tp_size=", c.tp),
        "--model_dir=" + c.target.model,
        "--backend=" + c.target.backend,
        absl::StrCat("--threads=", threads),
        absl::StrCat("--kv_cache_mb=", c.target.kv_cache_mb),
        "--listen=" + rank.health_address,
    };
    if (c.tp > 1) {
      rank.args.push_back("--comm=" + c.comm);
      rank.args.push_back("--rendezvous=" + rendezvous);
      rank.args.push_back("--run_id=" + run_id);
      rank.args.push_back("--hostname=" + c.host);
    } else {
      rank.args.push_back("--comm=local");
    }
    rank.args.insert(rank.args.end(), c.target.args.begin(), c.target.args.end());
    plan.processes.push_back(rank);
  }

  if (c.with_draft) {
    ProcessSpec draft;
    draft.name = "draft";
    draft.binary = worker_binary;
    draft.health_address = Address(c.host, ports.draft);
    draft.log_path = log_dir + "/draft.log";
    draft.stop_stage = 1;
    draft.cpus = affinity.draft;
    const int threads =
        DefaultThreads(c.draft.threads, c.cpu_affinity ? draft.cpus.size() : all_cores, 1);
    draft.args = {
        "--role=draft",
        "--tp_size=1",
        "--model_dir=" + c.draft.model,
        "--backend=" + c.draft.backend,
        absl::StrCat("--threads=", threads),
        absl::StrCat("--kv_cache_mb=", c.draft.kv_cache_mb),
        "--listen=" + draft.health_address,
        "--comm=local",
    };
    draft.args.insert(draft.args.end(), c.draft.args.begin(), c.draft.args.end());
    plan.processes.push_back(draft);
  }
  return plan;
}

std::string CommandLineOf(const ProcessSpec& process) {
  std::string out;
  if (!process.cpus.empty()) absl::StrAppend(&out, "taskset -c ", FormatCpuList(process.cpus), " ");
  absl::StrAppend(&out, Quote(process.binary));
  for (const std::string& a : process.args) absl::StrAppend(&out, " ", Quote(a));
  return out;
}

}  // namespace tandem::client
