// Prometheus metrics of the coordinator, optionally served over HTTP at /metrics.
//
// All series are prefixed `tandem_`. Times are milliseconds. Every Record*/Set*
// method is thread-safe and cheap (atomic updates; label lookups only for the
// free-form `reason` and `worker` labels). Out-of-range inputs are clamped (negative
// counts to 0, accepted to proposed, fractions to [0, 1]); NaN observations are
// dropped, so bad values never corrupt the exposition.
//
// Series:
//   tandem_requests_total{status}               finished requests by gRPC status name
//                                               ("ok", "invalid_argument", ...)
//   tandem_generated_tokens_total               tokens generated for clients
//   tandem_draft_tokens_proposed_total          proposals sent for verification
//   tandem_draft_tokens_accepted_total          proposals the target accepted
//   tandem_speculation_steps_total{method}      per-sequence target steps by method
//                                               ("none", "draft", "prompt_lookup", ...)
//   tandem_fallback_steps_total{reason}         steps without the requested proposer
//   tandem_controller_steps_total{decision}     per-sequence target steps by what the
//                                               speculation controller and planner
//                                               decided: "speculate", "probe", or why
//                                               no proposal was verified ("controller"
//                                               = the cost model chose K = 0,
//                                               "batch_limit", "draft_down", ...,
//                                               "no_candidates", "length",
//                                               "not_requested")
//   tandem_controller_k                         histogram: proposals verified per
//                                               sequence step, buckets 0..16
//   tandem_controller_predicted_speedup         histogram: modelled speedup of the
//                                               controller's choice per step
//   tandem_phase_mode_total{mode}               engine phases by pipelining mode:
//                                               "sequential", "lockstep", "ping_pong"
//   tandem_pipeline_predicted_gain              gauge: the current mode's predicted
//                                               round-time gain over sequential
//   tandem_overlap_slowdown{worker}             gauge: measured factor by which a
//                                               "target" (verify) or "draft" call is
//                                               slower while the other worker runs one
//   tandem_speculation_cost_factor{proposers}   gauge: kappa, modelled / realized
//                                               speedup of speculative phases at the
//                                               current batch size ([0.8, 4]), for
//                                               "draft_worker" (chains), "draft_tree"
//                                               and "other" proposers
//   tandem_speculation_cache_lookups_total{result}  verifies of a sequence with
//                                               pre-drafted outcomes (speculation
//                                               cache), "hit" when one became the next
//                                               candidates
//   tandem_speculation_cache_branches_total     outcomes pre-drafted (branches); per
//                                               lookup: the fan-out per step
//   tandem_worker_rejected_batches_total{worker,code}  batches a worker rejected
//                                               (a coordinator bug when > 0)
//   tandem_position_proposed_total{position}    proposals at draft position 1..max_k
//   tandem_position_accepted_total{position}    accepted proposals at that position
//   tandem_accepted_length                      histogram: proposals accepted per
//                                               speculative step, buckets 0..16
//   tandem_verified_nodes                       histogram: candidate nodes verified per
//                                               speculative step (a tree's size, a
//                                               chain's K), buckets 1..64 by powers of 2
//   (Medusa: position d is head d - 1's depth, so the position counters give per-head
//   acceptance, as the draft's per-position acceptance for a chain.)
//   tandem_step_latency_ms{phase}               histogram per batch step; phase =
//                                               draft | verify | collective | rpc |
//                                               overhead (coordinator time)
//   tandem_time_to_first_token_ms               histogram per request
//   tandem_time_per_output_token_ms             histogram per request
//   tandem_queue_time_ms                        histogram per request
//   tandem_queue_depth, tandem_running_sequences, tandem_draft_available (0/1),
//   tandem_draft_busy_fraction, tandem_target_busy_fraction          gauges
//   tandem_kv_blocks_used{worker}, tandem_kv_blocks_total{worker}    gauges
#ifndef TANDEM_COORDINATOR_METRICS_H_
#define TANDEM_COORDINATOR_METRICS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tandem/v1/tandem.pb.h"

namespace prometheus {
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace tandem::coordinator {

struct MetricsOptions {
  // "host:port" of the HTTP listener serving /metrics, e.g. "0.0.0.0:9090". Port 0
  // binds a free port (see CoordinatorMetrics::port()). Empty = no listener: metrics
  // are still recorded and readable through Serialize().
  std::string listen_address;
  // Per-position counters cover draft positions 1..max_speculative_tokens, >= 1.
  int max_speculative_tokens = 8;
};

class CoordinatorMetrics {
 public:
  // Builds the registry and, when asked, starts the HTTP listener. INVALID_ARGUMENT for
  // a malformed address or max_speculative_tokens < 1; UNAVAILABLE when the address
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> Create(const MetricsOptions& options);
  ~CoordinatorMetrics();

  CoordinatorMetrics(const CoordinatorMetrics&) = delete;
  CoordinatorMetrics& operator=(const CoordinatorMetrics&) = delete;

  // Bound HTTP port, 0 when there is no listener.
  int port() const { return port_; }
  // The current exposition in Prometheus text format (what GET /metrics returns).
  std::string Serialize() const;
  // The underlying registry, for units that add their own series.
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // One finished request and its final status.
  void RecordRequest(absl::StatusCode status);

  // One target step of one sequence.
  struct StepRecord {
    tandem::v1::SpeculationMethod method = tandem::v1::SPECULATION_METHOD_NONE;  // Used.
    int proposed = 0;          // Proposals verified this step (0 = plain decode).
    int accepted = 0;          // Of those accepted, [0, proposed].
    int generated_tokens = 0;  // Tokens this step added to the client's output.
    int nodes = 0;             // Candidate nodes verified (a tree's size; 0 = not known).
  };
  void RecordStep(const StepRecord& step);

  // `steps` target steps ran without the requested proposer, e.g. reason "draft_down",
  // "batch_limit".
  void RecordFallbackSteps(absl::string_view reason, int steps = 1);

  // One sequence step as the controller saw it: `decision` (see the series above),
  // the proposals it verified, and the modelled speedup of the controller's choice
  // (unset for fixed-K steps, which the controller does not choose).
  void RecordControllerStep(absl::string_view decision, int k,
                            std::optional<double> predicted_speedup);

  // One engine phase ran in pipelining `mode` (a PipelineModeLabel) whose modelled gain
  // over sequential rounds is `predicted_gain` (e.g. 0.2 = 20 % shorter; non-finite
  // values leave the gauge).
  void RecordPhaseMode(absl::string_view mode, double predicted_gain);
  // The measured overlap slowdowns of verify and draft calls, and the controller's
  // speculation cost factors at the current batch size for the draft's chains, the
  // other proposers and the draft's tree option (non-finite values leave the gauges).
  void SetSlowdowns(double verify_overlap, double draft_overlap, double draft_worker_factor,
                    double other_factor, double draft_tree_factor = 1.0);
  // One lookup of pre-drafted outcomes after a verify (`branches` of them were
  // drafted, >= 0): `hit` when one was used.
  void RecordSpeculationCacheLookup(bool hit, int branches);

  // A worker ("draft" or "target") rejected a batch the coordinator built with `code`.
  void RecordRejectedBatch(absl::string_view worker, absl::StatusCode code);

  // Wall time of one batch step, split by phase; unset phases are not observed.
  struct StepLatency {
    std::optional<double> draft_ms;       // Draft worker compute.
    std::optional<double> verify_ms;      // Target forward pass (leader).
    std::optional<double> collective_ms;  // Target collectives.
    std::optional<double> rpc_ms;         // Wire and serialisation time of the step's RPCs.
    std::optional<double> overhead_ms;    // Coordinator scheduling and bookkeeping.
  };
  void RecordStepLatency(const StepLatency& latency);

  // Per finished request.
  void RecordTimeToFirstToken(double ms);
  void RecordTimePerOutputToken(double ms);
  void RecordQueueTime(double ms);

  void SetQueueDepth(int depth);
  void SetRunningSequences(int count);
  void SetKvBlocks(absl::string_view worker, int used, int total);
  void SetDraftAvailable(bool available);
  void SetBusyFractions(double draft, double target);

 private:
  CoordinatorMetrics() = default;

  int max_k_ = 0;
  int port_ = 0;
  std::string local_host_;  // Where this process reaches the listener (for shutdown).
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;

  std::vector<prometheus::Counter*> requests_by_code_;  // Index: absl::StatusCode.
  prometheus::Counter* generated_tokens_ = nullptr;
  prometheus::Counter* proposed_ = nullptr;
  prometheus::Counter* accepted_ = nullptr;
  std::vector<prometheus::Counter*> steps_by_method_;  // Index: SpeculationMethod.
  prometheus::Family<prometheus::Counter>* fallback_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* rejected_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* controller_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* phase_mode_family_ = nullptr;
  prometheus::Counter* cache_hits_ = nullptr;
  prometheus::Counter* cache_misses_ = nullptr;
  prometheus::Counter* cache_branches_ = nullptr;
  prometheus::Gauge* pipeline_gain_ = nullptr;
  prometheus::Gauge* verify_slowdown_ = nullptr;
  prometheus::Gauge* draft_slowdown_ = nullptr;
  prometheus::Gauge* draft_worker_factor_ = nullptr;
  prometheus::Gauge* other_factor_ = nullptr;
  prometheus::Gauge* draft_tree_factor_ = nullptr;
  prometheus::Histogram* controller_k_ = nullptr;
  prometheus::Histogram* predicted_speedup_ = nullptr;
  std::vector<prometheus::Counter*> position_proposed_;  // Index: position - 1.
  std::vector<prometheus::Counter*> position_accepted_;
  prometheus::Histogram* accepted_length_ = nullptr;
  prometheus::Histogram* verified_nodes_ = nullptr;
  prometheus::Histogram* draft_latency_ = nullptr;
  prometheus::Histogram* verify_latency_ = nullptr;
  prometheus::Histogram* collective_latency_ = nullptr;
  prometheus::Histogram* rpc_latency_ = nullptr;
  prometheus::Histogram* overhead_latency_ = nullptr;
  prometheus::Histogram* ttft_ = nullptr;
  prometheus::Histogram* tpot_ = nullptr;
  prometheus::Histogram* queue_time_ = nullptr;
  prometheus::Gauge* queue_depth_ = nullptr;
  prometheus::Gauge* running_sequences_ = nullptr;
  prometheus::Gauge* draft_available_ = nullptr;
  prometheus::Gauge* draft_busy_ = nullptr;
  prometheus::Gauge* target_busy_ = nullptr;
  prometheus::Family<prometheus::Gauge>* kv_used_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* kv_total_family_ = nullptr;
};

// Lower-case gRPC status name used as the `status` label, e.g. "resource_exhausted".
std::string StatusLabel(absl::StatusCode code);
// Lower-case method name used as the `method` label, e.g. "prompt_lookup".
std::string MethodLabel(tandem::v1::SpeculationMethod method);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_METRICS_H_
