// Turns a ClusterConfig into the concrete processes of a local cluster: binaries,
// flags, listen addresses, cores, log files. Pure: no process is started here.
#ifndef TANDEM_CLIENT_CLUSTER_PLAN_H_
#define TANDEM_CLIENT_CLUSTER_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cluster_config.h"

namespace tandem::client {

// One process to start.
struct ProcessSpec {
  std::string name;               // "coordinator", "draft", "target-0", ...
  std::string binary;             // Executable path.
  std::vector<std::string> args;  // Arguments after the program name.
  std::vector<int> cpus;          // Cores to pin to; empty = not pinned.
  std::string health_address;     // host:port answering grpc.health.v1.
  std::string log_path;           // stdout and stderr go here.
  // Shutdown order: stage 0 (coordinator) stops first, then 1 (draft worker and target
  // leader, which tells its followers to exit), then 2 (followers, usually gone by then).
  int stop_stage = 0;
};

// Ports already chosen for every listener (0 is not allowed here: resolve free ports
// first). metrics = -1 turns the metrics endpoint off, openai = -1 the OpenAI API.
struct ClusterPorts {
  int coordinator = 0;
  int metrics = -1;
  int openai = -1;
  int rendezvous = 0;
  int draft = 0;
  std::vector<int> target;  // One per rank.
};

struct ClusterPlan {
  std::vector<ProcessSpec> processes;  // Start order: coordinator, target ranks, draft.
  std::string endpoint;                // Public API, host:port.
  std::string metrics_endpoint;        // host:port of /metrics, "" when off.
  std::string openai_endpoint;         // host:port of the OpenAI API, "" when off.
  std::string run_id;
};

// Builds the plan. `allowed_cpus` are the cores available (for --cpu-affinity and
// default thread counts: a pinned process gets one thread per core it owns, ranks
// sharing cores split them; unpinned ranks split all cores). Fails when affinity is
// asked for but cannot be honoured, or ports are missing.
absl::StatusOr<ClusterPlan> PlanCluster(const ClusterConfig& config, const ClusterPorts& ports,
                                        const std::string& coordinator_binary,
                                        const std::string& worker_binary, const std::string& run_id,
                                        const std::string& log_dir,
                                        const std::vector<int>& allowed_cpus);

// A shell-style rendering of one process's command line (for logs and --dry-run).
std::string CommandLineOf(const ProcessSpec& process);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_CLUSTER_PLAN_H_
