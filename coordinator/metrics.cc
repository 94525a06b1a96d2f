#include "coordinator/metrics.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "coordinator/metrics_endpoint.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace tandem::coordinator {
namespace {

constexpr int kMaxStatusCode = 16;  // absl::StatusCode::kUnauthenticated.

const prometheus::Histogram::BucketBoundaries& AcceptedLengthBuckets() {
  static const auto* buckets = [] {
    auto* b = new prometheus::Histogram::BucketBoundaries();
    for (int i = 0; i <= 16; ++i) b->push_back(i);
    return b;
  }();
  return *buckets;
}

const prometheus::Histogram::BucketBoundaries kSpeedupBuckets = {0.5, 0.75, 0.9, 1.0, 1.1, 1.25,
                                                                 1.5, 2,    2.5, 3,   4};
const prometheus::Histogram::BucketBoundaries kStepLatencyBucketsMs = {
    0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000};
const prometheus::Histogram::BucketBoundaries kRequestLatencyBucketsMs = {
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000, 120000};
const prometheus::Histogram::BucketBoundaries kPerTokenBucketsMs = {0.5, 1,   2,   5,   10,   20,
                                                                    50,  100, 200, 500, 1000, 2000};

void ObserveMs(prometheus::Histogram* histogram, std::optional<double> ms) {
  if (ms.has_value() && !std::isnan(*ms)) histogram->Observe(std::max(0.0, *ms));
}

}  // namespace

std::string StatusLabel(absl::StatusCode code) {
  return absl::AsciiStrToLower(absl::StatusCodeToString(code));
}

std::string MethodLabel(tandem::v1::SpeculationMethod method) {
  std::string name = tandem::v1::SpeculationMethod_Name(method);
  constexpr absl::string_view kPrefix = "SPECULATION_METHOD_";
  if (absl::string_view(name).substr(0, kPrefix.size()) == kPrefix) {
    name.erase(0, kPrefix.size());
  }
  return name.empty() ? absl::StrCat("unknown_", static_cast<int>(method))
                      : absl::AsciiStrToLower(name);
}

absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> CoordinatorMetrics::Create(
    const MetricsOptions& options) {
  if (options.max_speculative_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics: max_speculative_tokens = ", options.max_speculative_tokens, " must be >= 1"));
  }
  std::unique_ptr<CoordinatorMetrics> m(new CoordinatorMetrics());
  m->max_k_ = options.max_speculative_tokens;
  m->registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Registry& r = *m->registry_;

  auto& requests = prometheus::BuildCounter()
                       .Name("tandem_requests_total")
                       .Help("Finished requests by final gRPC status.")
                       .Register(r);
  for (int code = 0; code <= kMaxStatusCode; ++code) {
    m->requests_by_code_.push_back(
        &requests.Add({{"status", StatusLabel(static_cast<absl::StatusCode>(code))}}));
  }
  m->generated_tokens_ = &prometheus::BuildCounter()
                              .Name("tandem_generated_tokens_total")
                              .Help("Tokens generated for clients.")
                              .Register(r)
                              .Add({});
  m->proposed_ = &prometheus::BuildCounter()
                      .Name("tandem_draft_tokens_proposed_total")
                      .Help("Proposed tokens sent to the target for verification.")
                      .Register(r)
                      .Add({});
  m->accepted_ = &prometheus::BuildCounter()
                      .Name("tandem_draft_tokens_accepted_total")
                      .Help("Proposed tokens accepted by the target.")
                      .Register(r)
                      .Add({});
  auto& steps = prometheus::BuildCounter()
                    .Name("tandem_speculation_steps_total")
                    .Help("Target steps per sequence by the speculation method used.")
                    .Register(r);
  for (int method = 0; method <= tandem::v1::SpeculationMethod_MAX; ++method) {
    m->steps_by_method_.push_back(
        &steps.Add({{"method", MethodLabel(static_cast<tandem::v1::SpeculationMethod>(method))}}));
  }
  m->fallback_family_ = &prometheus::BuildCounter()
                             .Name("tandem_fallback_steps_total")
                             .Help("Target steps run without the requested proposer, by reason.")
                             .Register(r);
  m->controller_family_ =
      &prometheus::BuildCounter()
           .Name("tandem_controller_steps_total")
           .Help("Sequence steps by the speculation decision: speculate, probe, or why not.")
           .Register(r);
  m->controller_k_ = &prometheus::BuildHistogram()
                          .Name("tandem_controller_k")
                          .Help("Proposals verified per sequence step (0 = plain decoding).")
                          .Register(r)
                          .Add({}, AcceptedLengthBuckets());
  m->predicted_speedup_ = &prometheus::BuildHistogram()
                               .Name("tandem_controller_predicted_speedup")
                               .Help("Modelled speedup of the controller's choice per step.")
                               .Register(r)
                               .Add({}, kSpeedupBuckets);
  m->phase_mode_family_ = &prometheus::BuildCounter()
                               .Name("tandem_phase_mode_total")
                               .Help("Engine phases by pipelining mode.")
                               .Register(r);
  for (const char* mode : {"sequential", "lockstep", "ping_pong"}) {
    m->phase_mode_family_->Add({{"mode", mode}});
  }
  auto& lookups = prometheus::BuildCounter()
                      .Name("tandem_speculation_cache_lookups_total")
                      .Help("Verifies after which drafted-ahead proposals were looked up.")
                      .Register(r);
  m->cache_hits_ = &lookups.Add({{"result", "hit"}});
  m->cache_misses_ = &lookups.Add({{"result", "miss"}});
  m->cache_branches_ = &prometheus::BuildCounter()
                            .Name("tandem_speculation_cache_branches_total")
                            .Help("Verification outcomes pre-drafted while the target verified.")
                            .Register(r)
                            .Add({});
  m->rejected_family_ = &prometheus::BuildCounter()
                             .Name("tandem_worker_rejected_batches_total")
                             .Help("Batches a worker rejected (a coordinator bug when non-zero).")
                             .Register(r);
  auto& position_proposed =
      prometheus::BuildCounter()
          .Name("tandem_position_proposed_total")
          .Help("Proposed tokens verified at each draft position (1 = first).")
          .Register(r);
  auto& position_accepted =
      prometheus::BuildCounter()
          .Name("tandem_position_accepted_total")
          .Help("Proposed tokens accepted at each draft position (1 = first).")
          .Register(r);
  for (int position = 1; position <= m->max_k_; ++position) {
    const std::string label = absl::StrCat(position);
    m->position_proposed_.push_back(&position_proposed.Add({{"position", label}}));
    m->position_accepted_.push_back(&position_accepted.Add({{"position", label}}));
  }
  m->accepted_length_ = &prometheus::BuildHistogram()
                             .Name("tandem_accepted_length")
                             .Help(
                                 "Proposals accepted per speculative step (tokens committed "
                                 "in the step = this + 1).")
                             .Register(r)
                             .Add({}, AcceptedLengthBuckets());
  m->verified_nodes_ =
      &prometheus::BuildHistogram()
           .Name("tandem_verified_nodes")
           .Help("Candidate nodes verified per speculative step (tree size).")
           .Register(r)
           .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64});
  auto& latency = prometheus::BuildHistogram()
                      .Name("tandem_step_latency_ms")
                      .Help("Batch step time by phase, milliseconds.")
                      .Register(r);
  m->draft_latency_ = &latency.Add({{"phase", "draft"}}, kStepLatencyBucketsMs);
  m->verify_latency_ = &latency.Add({{"phase", "verify"}}, kStepLatencyBucketsMs);
  m->collective_latency_ = &latency.Add({{"phase", "collective"}}, kStepLatencyBucketsMs);
  m->rpc_latency_ = &latency.Add({{"phase", "rpc"}}, kStepLatencyBucketsMs);
  m->overhead_latency_ = &latency.Add({{"phase", "overhead"}}, kStepLatencyBucketsMs);
  m->ttft_ = &prometheus::BuildHistogram()
                  .Name("tandem_time_to_first_token_ms")
                  .Help("Request arrival to first committed token, milliseconds.")
                  .Register(r)
                  .Add({}, kRequestLatencyBucketsMs);
  m->tpot_ = &prometheus::BuildHistogram()
                  .Name("tandem_time_per_output_token_ms")
                  .Help("Mean time between output tokens of a request, milliseconds.")
                  .Register(r)
                  .Add({}, kPerTokenBucketsMs);
  m->queue_time_ = &prometheus::BuildHistogram()
                        .Name("tandem_queue_time_ms")
                        .Help("Request arrival to admission into the running batch, ms.")
                        .Register(r)
                        .Add({}, kRequestLatencyBucketsMs);
  auto gauge = [&r](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
  };
  m->queue_depth_ = gauge("tandem_queue_depth", "Requests waiting for admission.");
  m->running_sequences_ = gauge("tandem_running_sequences", "Sequences in the running batch.");
  m->draft_available_ = gauge("tandem_draft_available", "1 when the draft worker is healthy.");
  m->pipeline_gain_ = gauge("tandem_pipeline_predicted_gain",
                            "Predicted round-time gain of the current mode over sequential.");
  // Two gauges of one family, `label` = first and second, both starting at 1.
  auto gauge_pair = [&r](const char* name, const char* help, const char* label, const char* first,
                         const char* second) {
    auto& family = prometheus::BuildGauge().Name(name).Help(help).Register(r);
    std::pair<prometheus::Gauge*, prometheus::Gauge*> p{&family.Add({{label, first}}),
                                                        &family.Add({{label, second}})};
    p.first->Set(1);
    p.second->Set(1);
    return p;
  };
  std::tie(m->verify_slowdown_, m->draft_slowdown_) = gauge_pair(
      "tandem_overlap_slowdown",
      "Measured factor by which a worker's call is slower while the other worker runs one.",
      "worker", "target", "draft");
  auto& cost_factors =
      prometheus::BuildGauge()
          .Name("tandem_speculation_cost_factor")
          .Help(
              "Modelled over realized speedup of speculative phases at the current batch "
              "size ([0.8, 4]): the factor the controller charges a speculative step, by "
              "kind of speculation (the draft's chains, its tree option, other proposers).")
          .Register(r);
  m->draft_worker_factor_ = &cost_factors.Add({{"proposers", "draft_worker"}});
  m->draft_tree_factor_ = &cost_factors.Add({{"proposers", "draft_tree"}});
  m->other_factor_ = &cost_factors.Add({{"proposers", "other"}});
  for (prometheus::Gauge* g : {m->draft_worker_factor_, m->draft_tree_factor_, m->other_factor_}) {
    g->Set(1);
  }
  m->draft_busy_ = gauge("tandem_draft_busy_fraction",
                         "Fraction of recent wall time the draft worker spent computing.");
  m->target_busy_ = gauge("tandem_target_busy_fraction",
                          "Fraction of recent wall time the target group spent computing.");
  m->kv_used_family_ = &prometheus::BuildGauge()
                            .Name("tandem_kv_blocks_used")
                            .Help("KV cache blocks in use, per worker.")
                            .Register(r);
  m->kv_total_family_ = &prometheus::BuildGauge()
                             .Name("tandem_kv_blocks_total")
                             .Help("KV cache blocks in the budget, per worker.")
                             .Register(r);

  if (!options.listen_address.empty()) {
    absl::StatusOr<int> requested_port = ParseMetricsPort(options.listen_address);
    if (!requested_port.ok()) return requested_port.status();
    try {
      m->exposer_ = std::make_unique<prometheus::Exposer>(options.listen_address, 2);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("metrics: cannot listen on ", options.listen_address, ": ", e.what()));
    }
    m->exposer_->RegisterCollectable(m->registry_, "/metrics");
    m->local_host_ = LocalHostOf(options.listen_address);
    const std::vector<int> ports = m->exposer_->GetListeningPorts();
    m->port_ = ports.empty() ? *requested_port : ports.front();
    if (m->port_ == 0) {
      return absl::UnavailableError(absl::StrCat("metrics: listening on ", options.listen_address,
                                                 " but the bound port is unknown"));
    }
  }
  return m;
}

CoordinatorMetrics::~CoordinatorMetrics() {
  if (exposer_ == nullptr) return;
  // The embedded HTTP server (civetweb) notices a stop request only when its accept
  // poll returns, which without traffic takes its 2 s quantum: knock on the port until
  // the stop is through, so shutting down takes milliseconds.
  std::atomic<bool> stopped{false};
  std::thread knocker([&] {
    while (!stopped.load()) {
      KnockOnce(local_host_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  exposer_.reset();
  stopped.store(true);
  knocker.join();
}

std::string CoordinatorMetrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

void CoordinatorMetrics::RecordRequest(absl::StatusCode status) {
  int code = static_cast<int>(status);
  if (code < 0 || code > kMaxStatusCode) code = static_cast<int>(absl::StatusCode::kUnknown);
  requests_by_code_[code]->Increment();
}

void CoordinatorMetrics::RecordStep(const StepRecord& step) {
  const int proposed = std::max(0, step.proposed);
  const int accepted = std::clamp(step.accepted, 0, proposed);
  const int method = static_cast<int>(step.method);
  if (method >= 0 && method < static_cast<int>(steps_by_method_.size())) {
    steps_by_method_[method]->Increment();
  }
  generated_tokens_->Increment(std::max(0, step.generated_tokens));
  if (proposed == 0) return;
  proposed_->Increment(proposed);
  accepted_->Increment(accepted);
  accepted_length_->Observe(accepted);
  if (step.nodes > 0) verified_nodes_->Observe(step.nodes);
  for (int i = 0; i < std::min(proposed, max_k_); ++i) position_proposed_[i]->Increment();
  for (int i = 0; i < std::min(accepted, max_k_); ++i) position_accepted_[i]->Increment();
}

void CoordinatorMetrics::RecordFallbackSteps(absl::string_view reason, int steps) {
  if (steps <= 0) return;
  fallback_family_->Add({{"reason", std::string(reason)}}).Increment(steps);
}

void CoordinatorMetrics::RecordPhaseMode(absl::string_view mode, double predicted_gain) {
  phase_mode_family_->Add({{"mode", std::string(mode)}}).Increment();
  if (std::isfinite(predicted_gain)) pipeline_gain_->Set(predicted_gain);
}

void CoordinatorMetrics::SetSlowdowns(double verify_overlap, double draft_overlap,
                                      double draft_worker_factor, double other_factor,
                                      double draft_tree_factor) {
  if (std::isfinite(verify_overlap)) verify_slowdown_->Set(verify_overlap);
  if (std::isfinite(draft_overlap)) draft_slowdown_->Set(draft_overlap);
  if (std::isfinite(draft_worker_factor)) draft_worker_factor_->Set(draft_worker_factor);
  if (std::isfinite(other_factor)) other_factor_->Set(other_factor);
  if (std::isfinite(draft_tree_factor)) draft_tree_factor_->Set(draft_tree_factor);
}

void CoordinatorMetrics::RecordSpeculationCacheLookup(bool hit, int branches) {
  (hit ? cache_hits_ : cache_misses_)->Increment();
  cache_branches_->Increment(std::max(0, branches));
}

void CoordinatorMetrics::RecordControllerStep(absl::string_view decision, int k,
                                              std::optional<double> predicted_speedup) {
  controller_family_->Add({{"decision", std::string(decision)}}).Increment();
  controller_k_->Observe(std::max(0, k));
  if (predicted_speedup.has_value() && std::isfinite(*predicted_speedup)) {
    predicted_speedup_->Observe(std::max(0.0, *predicted_speedup));
  }
}

void CoordinatorMetrics::RecordRejectedBatch(absl::string_view worker, absl::StatusCode code) {
  rejected_family_->Add({{"worker", std::string(worker)}, {"code", StatusLabel(code)}}).Increment();
}

void CoordinatorMetrics::RecordStepLatency(const StepLatency& latency) {
  ObserveMs(draft_latency_, latency.draft_ms);
  ObserveMs(verify_latency_, latency.verify_ms);
  ObserveMs(collective_latency_, latency.collective_ms);
  ObserveMs(rpc_latency_, latency.rpc_ms);
  ObserveMs(overhead_latency_, latency.overhead_ms);
}

void CoordinatorMetrics::RecordTimeToFirstToken(double ms) { ObserveMs(ttft_, ms); }
void CoordinatorMetrics::RecordTimePerOutputToken(double ms) { ObserveMs(tpot_, ms); }
void CoordinatorMetrics::RecordQueueTime(double ms) { ObserveMs(queue_time_, ms); }

void CoordinatorMetrics::SetQueueDepth(int depth) { queue_depth_->Set(std::max(0, depth)); }
void CoordinatorMetrics::SetRunningSequences(int count) {
  running_sequences_->Set(std::max(0, count));
}

void CoordinatorMetrics::SetKvBlocks(absl::string_view worker, int used, int total) {
  const prometheus::Labels labels = {{"worker", std::string(worker)}};
  kv_used_family_->Add(labels).Set(std::max(0, used));
  kv_total_family_->Add(labels).Set(std::max(0, total));
}

void CoordinatorMetrics::SetDraftAvailable(bool available) {
  draft_available_->Set(available ? 1 : 0);
}

void CoordinatorMetrics::SetBusyFractions(double draft, double target) {
  auto fraction = [](double v) { return std::isnan(v) ? 0.0 : std::clamp(v, 0.0, 1.0); };
  draft_busy_->Set(fraction(draft));
  target_busy_->Set(fraction(target));
}

}  // namespace tandem::coordinator
