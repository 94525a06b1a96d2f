// The speculation engine: admits requests, and runs draft -> verify -> commit phases
// against the draft worker and the target group (docs/architecture.md §2-§3, §8).
//
// Threads: one engine thread runs the phases (planned by step_planner); each worker
// has a SerialExecutor so a phase's Draft and Verify calls overlap; a monitor thread
// probes unavailable workers and refreshes worker statistics. RPC handlers only
// Submit() requests and read their OutputChannel.
//
// Failures, by the status a worker call ended with (coordinator/worker_api.h):
//  * draft, transport failure (unreachable, no answer in time): the draft is marked
//    unavailable and every sequence continues with target-only decoding (or prompt
//    lookup for AUTO) until the monitor sees it healthy again; it is then described
//    anew (limits, KV) and re-prefilled from the committed tokens;
//  * draft, NOT_FOUND: it lost the sequences (restarted): they are re-prefilled;
//  * draft, any other code (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, OUT_OF_RANGE, ...):
//    it rejected a batch the coordinator built, which is a coordinator bug. Logged with
//    the batch's shape, counted in tandem_worker_rejected_batches_total{worker="draft"},
//    and only the sequences of that batch step once without the draft;
//  * target, transport failure: the target is marked unavailable; sequences pause and
//    resume by re-prefilling once it is back, or end UNAVAILABLE after the recovery
//    timeout or their deadline. NOT_FOUND: those sequences are re-prefilled. Any other
//    code fails the sequences of that batch (counted as a rejected batch too).
// Committed tokens only grow on successful verifies, so streamed tokens are never
// repeated or skipped.
//
// Admission (coordinator/kv_admission.h): FIFO with worst-case KV reservations; a
// request that can never fit the target is refused at Submit; a queued request whose
// deadline passes ends DEADLINE_EXCEEDED without waiting for the client.
#ifndef TANDEM_COORDINATOR_ENGINE_H_
#define TANDEM_COORDINATOR_ENGINE_H_

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/admission_queue.h"
#include "coordinator/kv_admission.h"
#include "coordinator/metrics.h"
#include "coordinator/phase_calibration.h"
#include "coordinator/pipeline_mode.h"
#include "coordinator/planning_batch.h"
#include "coordinator/proposers/registry.h"
#include "coordinator/realized_speedup.h"
#include "coordinator/relative_slowdown.h"
#include "coordinator/sequence.h"
#include "coordinator/serial_executor.h"
#include "coordinator/step_planner.h"
#include "coordinator/worker_api.h"
#include "model/tokenizer.h"
#include "spec/cost_fit.h"
#include "spec/cost_model.h"
#include "spec/speculation_controller.h"

namespace tandem::coordinator {

struct EngineOptions {
  PlannerOptions planner;
  // Proposers served after the built-in ones (tests: a testonly method).
  std::vector<std::shared_ptr<const Proposer>> extra_proposers;
  // Prompt lookup's distinct continuations per proposal: 1 = chains, more = token trees
  // (ProposerConfig::prompt_lookup_branches).
  int prompt_lookup_branches = 1;
  // Medusa's tree size for requests without a fixed one (ProposerConfig::medusa_nodes).
  int medusa_nodes = kDefaultMedusaNodes;
  spec::ControllerConfig controller;  // Per-sequence speculation controller.
  // Cost terms before measurements are in, and always when !measured_costs.
  spec::CostModel fixed_costs;
  int max_running = 64;  // Sequences decoding at once.
  int max_queue = 256;   // Waiting requests; beyond: RESOURCE_EXHAUSTED.
  // How long sequences wait for an unavailable target group before failing.
  absl::Duration target_recovery_timeout = absl::Seconds(60);
  absl::Duration monitor_interval = absl::Milliseconds(200);
  // Generation ends at any of these ids (model/generation_config.h's stop_token_ids).
  std::vector<int> stop_token_ids = {2};
  // The controller uses cost terms fitted to the measured draft and verify call times
  // at the current batch size (true) instead of fixed_costs (false).
  bool measured_costs = true;
  // Switching between pipelining modes (coordinator/pipeline_mode.h).
  PipelineHysteresis pipeline_hysteresis;
  // Run every pipelined phase in this mode instead of choosing it from the fits
  // (tests, benchmarks); unset = choose.
  std::optional<PipelineMode> forced_pipeline_mode;
  // A batch a worker rejects ends the process (LOG(FATAL)) instead of being absorbed:
  // tests run with it so that such a coordinator bug cannot pass unnoticed.
  bool strict_worker_batches = false;
};

// What the engine learned from its workers (at start-up, and again when a worker
// comes back).
struct ClusterInfo {
  v1::DescribeResponse target;
  v1::DescribeResponse draft;  // Unset fields until the draft has been described.
  bool has_draft = false;      // A draft worker is configured.
  bool draft_described = false;
};

class Engine {
 public:
  // `draft` may be null (no draft worker). `metrics` may be null. The tokenizer and
  // metrics must outlive the engine.
  Engine(const EngineOptions& options, const Tokenizer* tokenizer,
         std::unique_ptr<WorkerApi> target, std::unique_ptr<WorkerApi> draft,
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

  // The served proposers (methods, AUTO's chain); final once Start has described the
  // target (its leader's methods, e.g. MEDUSA, are added then).
  const ProposerRegistry& proposers() const { return proposers_; }
  // A copy of the current cluster description (thread-safe).
  ClusterInfo cluster() const;
  bool draft_available() const { return draft_available_.load(); }
  bool target_available() const { return target_available_.load(); }
  // Busy fractions of the two workers since start (time inside calls / wall time).
  double draft_busy_fraction() const;
  double target_busy_fraction() const;
  // Batches a worker rejected (a code other than transport failure or NOT_FOUND):
  // always 0 unless the coordinator built a bad batch.
  int64_t rejected_batches() const { return rejected_batches_.load(); }

 private:
  struct TargetResult;
  struct DraftResult;

  void Loop();
  void Monitor();
  // Waits for the target (and the draft, up to `give_up`) to describe themselves.
  absl::Status DescribeWorkers(absl::Time give_up, const std::function<bool()>& cancelled);
  // Takes a worker description into the planner's limits and the KV admission policy
  // (engine thread, or before the threads start).
  void ApplyTargetDescription(const v1::DescribeResponse& d);
  // Rebuilds proposers_ with `target_methods` (what the target leader serves) and gives
  // every served method its server-wide acceptance prior.
  void ServeProposers(const std::vector<v1::SpeculationMethod>& target_methods);
  void ApplyDraftDescription(const v1::DescribeResponse& d);
  void AdmitWaiting(absl::Time now);
  // Ends queued requests whose client cancelled or whose deadline passed.
  void ExpireQueued(absl::Time now);
  // Ends the held request when cancelled or past its deadline; true if it ended.
  bool EndHeldIfDone(absl::Time now);
  void ReapSequences(absl::Time now);
  void ApplyResets();
  void RunPhase(PhasePlan& plan);
  // The phase's calls to one worker (prefill, then verify or draft), timed.
  TargetResult CallTarget(const PhasePlan& plan);
  DraftResult CallDraft(const PhasePlan& plan);
  void ApplyDraftResult(const DraftResult& r, PhasePlan& plan,
                        CoordinatorMetrics::StepLatency* latency);
  void ApplyTargetResult(const TargetResult& r, PhasePlan& plan,
                         CoordinatorMetrics::StepLatency* latency);
  void OnTargetFailure(const absl::Status& status, const std::vector<Sequence*>& batch,
                       absl::Time now);
  void OnDraftFailure(const absl::Status& status, const PhasePlan& plan);
  // Releases the sequences' caches: their ids on the target; their ids and their
  // proposers' branch ids (Proposer::AppendWorkerIds) on the draft.
  void ReleaseOnWorkers(const std::vector<std::shared_ptr<Sequence>>& sequences);
  void RecordFinished(const Sequence& s, absl::Time now);
  void RecordRejectedBatch(const char* worker, const absl::Status& status,
                           const std::string& shape);
  Sequence* FindRunning(uint64_t id) const;
  // The pipelining mode of the next phase over `batch` running sequences, from the
  // measured fits (sequential until both have 8 calls), and records the decision's gain.
  PipelineMode ChoosePipelineMode(int batch);
  // The measured share of pre-drafted lookups that supplied the next candidates (with
  // its prior), [0, 1].
  double AheadHitRate() const;
  // WorkerAvailability::predraft_token_budget for a phase of `batch` sequences: the
  // draft tokens beyond each sequence's likeliest outcome that the measured fits
  // predict to fit within the verify; -1 while the fits are not ready.
  int PredraftTokenBudget(int batch) const;
  // Before a verify's results are applied: the mean K of its draft-worker candidates.
  void ObserveDraftK(const PhasePlan& plan);
  // After: whether the pre-drafted outcomes of the verified sequences that had them
  // (`had_ahead`: how many per sequence, parallel to plan.verify_sequences) supplied
  // their next candidates; feeds the hit rate, the fan-out and the metrics.
  void ObserveAheadHits(const PhasePlan& plan, const std::vector<int>& had_ahead);
  // Feed a decode-shaped verify (draft) call's time to its fit and, once the fit has
  // data, to its overlap slowdown (overlapped: the other worker had work in `plan`).
  void ObserveVerifyCall(const PhasePlan& plan, int rows, double ms);
  void ObserveDraftCall(const PhasePlan& plan, int proposals, double ms);
  // A phase calibrated as `calibration` (observed) took `wall_ms`; `generated_before`,
  // parallel to plan.verify_sequences, is what each had generated before it: feeds the
  // realized speedup.
  void ObserveRealized(const PhasePlan& plan, const PhaseCalibration& calibration,
                       const std::vector<int>& generated_before, double wall_ms);
  // The cost terms of a step over `batch` sequences (measured or fixed).
  void SetCostTerms(int batch, WorkerAvailability* workers) const;
  // The tree option's draft terms from the tree calls' own fit, relative to the chain's
  // terms `chain_costs` (of which the exposed share `exposed` is charged in lockstep).
  void SetTreeCostTerms(int batch, const spec::CostModel& chain_costs, double exposed,
                        WorkerAvailability* workers) const;
  // Resets the state of `s`'s proposers that run at `site` (their worker lost it).
  // Candidates already proposed stay valid: the target can still verify them.
  void ResetProposers(Sequence& s, ProposerSite site);

  const EngineOptions options_;
  PlannerOptions planner_;
  const Tokenizer* tokenizer_;
  std::unique_ptr<WorkerApi> target_;
  std::unique_ptr<WorkerApi> draft_;
  CoordinatorMetrics* metrics_;
  // The served proposers: built at construction, rebuilt once the target is described
  // (ServeProposers) with the methods its leader serves.
  ProposerRegistry proposers_;
  KvAdmission kv_;  // Engine thread only (after Start).

  mutable absl::Mutex cluster_mu_;
  ClusterInfo cluster_ ABSL_GUARDED_BY(cluster_mu_);
  // A draft description the monitor took when the draft came back, for the engine
  // thread to apply.
  std::optional<v1::DescribeResponse> pending_draft_description_ ABSL_GUARDED_BY(cluster_mu_);
  std::atomic<int64_t> rejected_batches_{0};

  SerialExecutor target_exec_{"target"};
  SerialExecutor draft_exec_{"draft"};
  AdmissionQueue<std::shared_ptr<Sequence>> queue_;
  std::atomic<uint64_t> next_id_{1};

  std::atomic<bool> draft_available_{false};
  std::atomic<bool> target_available_{false};
  std::atomic<bool> draft_reset_pending_{false};
  // Draft ids of sequences that finished while the draft was unavailable: released when
  // it is back (engine thread only).
  std::vector<uint64_t> unreleased_draft_ids_;
  std::atomic<bool> target_reset_pending_{false};
  std::atomic<bool> stopping_{false};
  absl::Time started_;
  std::string draft_instance_, target_instance_;  // Monitor thread only.

  // Engine thread only.
  std::vector<std::shared_ptr<Sequence>> running_;
  std::shared_ptr<Sequence> held_;  // Popped from the queue, waiting for KV room.
  // Phase time beyond its longest worker task (planning, RPC setup, applying results).
  double phase_overhead_ms_ema_ = 0;
  PipelineModeSelector pipeline_selector_{options_.pipeline_hysteresis};
  double pipeline_gain_ = 0;  // Predicted gain of the last chosen mode.
  double draft_k_ema_ = 0;    // Proposals per draft-worker step, moving average.
  // Drafted-ahead lookups and hits, exponentially forgotten (the lockstep hit rate).
  double ahead_lookups_ = 0, ahead_hits_ = 0;
  double ahead_fanout_ = 0;  // Outcomes pre-drafted per lookup, moving average (0: none yet).
  // Server-wide acceptance per served method, of its chains and of its tree option, the
  // controllers' prior (engine thread).
  std::map<v1::SpeculationMethod, std::array<std::unique_ptr<spec::PositionAcceptance>, 2>>
      server_acceptance_;
  // Call time against size (verify: sequences and rows; draft: proposals of chain calls;
  // draft prefill: tokens fed), for the cost terms.
  spec::BatchCallFit verify_fit_{0.98, 1.0, 0.0, 0.05};
  spec::LinearCostFit draft_fit_{0.98, 0.3, 0.1};
  // Draft calls that build trees (time against their proposals' depth): the tree
  // option's own c and o.
  spec::LinearCostFit draft_tree_fit_{0.98, 0.3, 0.1};
  spec::LinearCostFit draft_feed_fit_{0.98, 0.5, 0.01, 2.0, 256.0};
  // How much slower verify / draft calls run while the other worker has work.
  RelativeSlowdown verify_overlap_, draft_overlap_;
  // Committed tokens per ms of speculative against plain phases, per batch size: the
  // controller's calibration.
  RealizedSpeedup realized_;
  PlanningBatch planning_batch_;  // The batch phases are priced at (engine thread).

  std::thread loop_thread_;
  std::thread monitor_thread_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_ENGINE_H_
