// Description of a Tandem cluster (models, tensor parallelism, backend, ports,
// threads, KV budget, coordinator options, CPU affinity), read from a JSON file and
// overridable by `tandem up` flags. The same description drives local runs and the
// deployment manifests. The file format is documented in client/README.md.
#ifndef TANDEM_CLIENT_CLUSTER_CONFIG_H_
#define TANDEM_CLIENT_CLUSTER_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/restart_policy.h"

namespace tandem::client {

// One worker role (draft, or every rank of the target group).
struct WorkerConfig {
  std::string model;              // Hugging Face model directory.
  std::string backend = "cpu";    // "cpu" or "cuda".
  int threads = 0;                // Compute threads per process; 0 = the cores it gets.
  int kv_cache_mb = 256;          // KV cache budget per process, MiB.
  std::vector<std::string> args;  // Extra tandem-worker flags, passed as given.
};

struct CoordinatorConfig {
  int port = 50051;               // Public API port; 0 = a free port.
  int metrics_port = 0;           // Prometheus /metrics port; 0 = a free port; -1 = off.
  int openai_port = -1;           // OpenAI-compatible HTTP API port; 0 = a free one; -1 = off.
  int rendezvous_port = 0;        // Target group rendezvous port; 0 = a free port.
  bool pipelining = true;         // Draft/verify overlap (coordinator --pipelining).
  int max_k = 8;                  // Largest draft length K.
  int max_running = 64;           // Sequences decoding at once.
  int max_queue = 256;            // Admission queue bound.
  std::vector<std::string> args;  // Extra tandem-coordinator flags, passed as given.
};

struct ClusterConfig {
  std::string host = "127.0.0.1";  // Address every process listens on and is reached at.
  WorkerConfig target;
  int tp = 4;                // Target group size (tensor-parallel ranks).
  std::string comm = "tcp";  // Collective backend of the target group.
  bool with_draft = true;    // False: no draft worker (speculation by prompt lookup).
  WorkerConfig draft;
  CoordinatorConfig coordinator;
  bool cpu_affinity = false;       // Pin draft and target group to disjoint cores.
  std::string draft_cpus;          // Explicit cpulist for the draft ("" = planned).
  std::string target_cpus;         // Explicit cpulist for the target group ("" = planned).
  std::string log_dir;             // Per-process log files ("" = a fresh temp dir).
  double startup_timeout_s = 300;  // Bound on reaching healthy.
  RestartPolicy restart;           // What `up` does when a process dies.

  ClusterConfig() {
    target.model = "models/target";
    draft.model = "models/draft";
  }
};

// Parses a JSON cluster description over the defaults above. Unknown keys and wrong
// types are errors naming the key path (e.g. "target.tp: expected an integer").
absl::StatusOr<ClusterConfig> ParseClusterConfig(const std::string& json_text);

// Reads and parses `path`; errors name the file.
absl::StatusOr<ClusterConfig> LoadClusterConfig(const std::string& path);

// Checks ranges and combinations (tp >= 1, ports, backends, non-empty models, ...).
absl::Status ValidateClusterConfig(const ClusterConfig& config);

// The description as JSON (the file format; ParseClusterConfig(ToJson(c)) == c).
std::string ClusterConfigToJson(const ClusterConfig& config);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_CLUSTER_CONFIG_H_
