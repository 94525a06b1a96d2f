// Start-up configuration of a tandem-worker process (one per draft worker or target
// rank), as given by its command-line flags, and its validation.
#ifndef TANDEM_WORKER_WORKER_OPTIONS_H_
#define TANDEM_WORKER_WORKER_OPTIONS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/factory.h"
#include "kernels/backend.h"
#include "model/synthetic_weights.h"

namespace tandem {
namespace worker {

struct WorkerOptions {
  std::string role = "target";      // "draft" or "target".
  int rank = 0;                     // Tensor-parallel rank; 0 = leader.
  int tp_size = 1;                  // Ranks in the target group (1 for the draft).
  std::string model_dir;            // Hugging Face checkpoint directory.
  std::string synthetic;            // Instead of model_dir: synthetic weights (benchmarks).
  std::string backend = "cpu";      // "cpu" or "cuda".
  int threads = 0;                  // Compute threads; 0 = one per hardware thread.
  int kv_cache_mb = 256;            // KV cache budget of this rank, MiB.
  std::string kv_dtype = "f32";     // KV cache element type: "f32", "f16" or "bf16".
  int block_size = 16;              // Tokens per KV block.
  int max_batch_tokens = 1024;      // Positions in one forward pass.
  int max_speculative_tokens = 16;  // Max K per sequence.
  std::string listen = "0.0.0.0:50061";
  std::string comm = "tcp";            // "tcp", "gloo", "local" or "nccl" (tp_size > 1).
  std::string rendezvous;              // host:port of tandem.v1.Rendezvous.
  std::string rendezvous_dir;          // File-store directory (one machine).
  std::string run_id;                  // Names this group's keys in the store.
  std::string hostname = "127.0.0.1";  // Address the collectives publish.
  absl::Duration lease_timeout = absl::Seconds(120);
  int proposal_top_k = 32;
  absl::Duration step_timeout = absl::Seconds(30);
  absl::Duration leader_timeout = absl::Seconds(10);
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration regroup_timeout = absl::Seconds(15);

  bool is_group() const { return tp_size > 1; }
  bool is_leader() const { return rank == 0; }
  // kv_dtype as a DType (kF32 unless "f16" or "bf16").
  DType KvDType() const {
    return kv_dtype == "f16" ? DType::kF16 : kv_dtype == "bf16" ? DType::kBF16 : DType::kF32;
  }
};

// Checks every field (not the model directory, which loading checks):
// INVALID_ARGUMENT naming the flag and the accepted values. Exactly one of model_dir and
// synthetic must be given.
absl::Status ValidateWorkerOptions(const WorkerOptions& options);

// The synthetic model of `options.synthetic` (model/synthetic_weights.h: real shapes,
// random values, NOT A MODEL) for this process's rank: "<model>" takes --rank and
// --tp_size; "<model>:R/N" must agree with them. INVALID_ARGUMENT naming --synthetic.
absl::StatusOr<SyntheticModel> ResolveSyntheticModel(const WorkerOptions& options);

// The collective options of this rank (rendezvous source, run id, hostname; the
// connect timeout is the regroup timeout).
CommOptions GroupCommOptions(const WorkerOptions& options);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_WORKER_OPTIONS_H_
