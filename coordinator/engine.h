// The speculation engine: admits requests, and runs draft -> verify -> commit phases
// against the draft worker and the target group (DESIGN.md §2-§3, §8).
//
// Threads: one engine thread runs the phases (planned by step_planner); each worker
// has a SerialExecutor so a phase's Draft and Verify calls overlap; a monitor thread
// probes unavailable workers and refreshes worker statistics. RPC handlers only
// Submit() requests and read their OutputChannel.
//
// Failures: a failed Draft marks the draft unavailable and its sequences continue with
// target-only decoding (or prompt lookup for AUTO) until the monitor sees it healthy
// again, when it is re-prefilled from the committed tokens. A failed Verify marks the
// target unavailable; its sequences pause and resume by re-prefilling once it is back,
// or end UNAVAILABLE after the recovery timeout or their deadline. Committed tokens
// only grow on successful verifies, so streamed tokens are never repeated or skipped.
#ifndef TANDEM_COORDINATOR_ENGINE_H_
#define TANDEM_COORDINATOR_ENGINE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/admission_queue.h"
#include "coordinator/metrics.h"
#include "coordinator/sequence.h"
#include "coordinator/serial_executor.h"
#include "coordinator/step_planner.h"
#include "coordinator/worker_client.h"
#include "model/tokenizer.h"
#include "spec/cost_fit.h"
#include "spec/cost_model.h"

namespace tandem::coordinator {

struct EngineOptions {
  PlannerOptions planner;
  spec::AdaptiveKConfig adaptive_k;
  int max_running = 64;  // Sequences decoding at once.
  int max_queue = 256;   // Waiting requests; beyond: RESOURCE_EXHAUSTED.
  // How long sequences wait for an unavailable target group before failing.
  absl::Duration target_recovery_timeout = absl::Seconds(60);
  absl::Duration monitor_interval = absl::Milliseconds(200);
  int eos_token_id = 2;
  // Adaptive K uses cost terms fitted to the measured draft and verify call times
  // (true) instead of the fixed adaptive_k.cost (false).
  bool measured_costs = false;
};

// What the engine learned from its workers at start-up.
struct ClusterInfo {
  v1::DescribeResponse target;
  v1::DescribeResponse draft;  // Unset fields when no draft worker is configured.
  bool has_draft = false;
};

class Engine {
 public:
  // `draft` may be null (no draft worker). `metrics` may be null. The tokenizer and
  // metrics must outlive the engine.
  Engine(const EngineOptions& options, const Tokenizer* tokenizer,
         std::unique_ptr<WorkerClient> target, std::unique_ptr<WorkerClient> draft,
         CoordinatorMetrics* metrics);
  ~Engine();

  // Describes the workers (waiting up to `wait` for them to come up, or until
  // `cancelled` returns true), fixes the planner's limits from their answers, and
  // starts the threads.
  absl::Status Start(absl::Duration wait, const std::function<bool()>& cancelled = {});
  // Fails every waiting and running request with UNAVAILABLE and joins the threads.
  void Stop();

  // Queues a validated, tokenised request. RESOURCE_EXHAUSTED when the queue is full
  // or when the request could never fit in the workers' KV caches.
  absl::StatusOr<std::shared_ptr<Sequence>> Submit(ValidatedRequest request,
                                                   std::vector<int32_t> prompt, int max_new_tokens,
                                                   absl::Time deadline,
                                                   std::shared_ptr<OutputChannel> output);
  // Takes a cancelled request out of the queue if it is still there (then it is
  // failed here); running ones are ended by the engine at its next step.
  void Cancel(const std::shared_ptr<Sequence>& sequence);

  const ClusterInfo& cluster() const { return cluster_; }
  bool draft_available() const { return draft_available_.load(); }
  bool target_available() const { return target_available_.load(); }
  // Busy fractions of the two workers since start (time inside calls / wall time).
  double draft_busy_fraction() const;
  double target_busy_fraction() const;

 private:
  void Loop();
  void Monitor();
  void AdmitWaiting(absl::Time now);
  void ReapSequences(absl::Time now);
  void ApplyResets();
  void RunPhase(PhasePlan& plan);
  void OnTargetFailure(const absl::Status& status, const std::vector<Sequence*>& batch,
                       absl::Time now);
  void OnDraftFailure(const absl::Status& status, const PhasePlan& plan);
  void ReleaseOnWorkers(const std::vector<uint64_t>& ids);
  int BlocksFor(const Sequence& s, int block_size) const;
  void RecordFinished(const Sequence& s, absl::Time now);

  const EngineOptions options_;
  PlannerOptions planner_;
  const Tokenizer* tokenizer_;
  std::unique_ptr<WorkerClient> target_;
  std::unique_ptr<WorkerClient> draft_;
  CoordinatorMetrics* metrics_;
  ClusterInfo cluster_;

  SerialExecutor target_exec_{"target"};
  SerialExecutor draft_exec_{"draft"};
  AdmissionQueue<std::shared_ptr<Sequence>> queue_;
  std::atomic<uint64_t> next_id_{1};

  std::atomic<bool> draft_available_{false};
  std::atomic<bool> target_available_{false};
  std::atomic<bool> draft_reset_pending_{false};
  std::atomic<bool> target_reset_pending_{false};
  std::atomic<bool> stopping_{false};
  absl::Time started_;
  std::string draft_instance_, target_instance_;  // Monitor thread only.

  // Engine thread only.
  std::vector<std::shared_ptr<Sequence>> running_;
  std::shared_ptr<Sequence> held_;  // Popped from the queue, waiting for KV room.
  double draft_ms_ema_ = 0;         // Draft call time, moving average.
  double verify_ms_ema_ = 0;        // Verify call time, moving average.
  // Call time against size (verify: rows; draft: proposals), for adaptive K.
  spec::LinearCostFit verify_fit_{0.98, 1.0, 0.05};
  spec::LinearCostFit draft_fit_{0.98, 0.3, 0.1};

  std::thread loop_thread_;
  std::thread monitor_thread_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_ENGINE_H_
