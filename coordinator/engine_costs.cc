// Engine: the measured terms each phase is planned with — the speculation controller's
// cost terms (spec/cost_fit.h) and the pipelining mode (coordinator/pipeline_mode.h) —
// and the observations that feed them (docs/architecture.md §3).
#include <glog/logging.h>

#include <algorithm>

#include "absl/algorithm/container.h"
#include "coordinator/engine.h"

namespace tandem::coordinator {
namespace {

// Draft prefill calls measured before their cost is charged as a switch cost.
constexpr int kMinFeedObservations = 4;
// Calls both fits need before the pipelining mode is chosen from them (sequential before).
constexpr int kMinPipelineObservations = 8;
// The lockstep hit rate's prior (1 hit in 4 lookups) and the weight each new lookup
// leaves to the past.
constexpr double kAheadPriorHits = 1, kAheadPriorLookups = 4, kAheadForgetting = 0.98;

}  // namespace

PipelineMode Engine::ChoosePipelineMode(int batch) {
  if (options_.forced_pipeline_mode.has_value()) return *options_.forced_pipeline_mode;
  if (verify_fit_.observations() < kMinPipelineObservations ||
      draft_fit_.observations() < kMinPipelineObservations) {
    pipeline_gain_ = 0;
    return PipelineMode::kSequential;
  }
  PipelineInputs in;
  in.verify = {verify_fit_.intercept(), verify_fit_.per_row(), verify_fit_.per_sequence()};
  in.draft = {draft_fit_.intercept(), draft_fit_.slope()};
  in.batch = batch;
  in.k = draft_k_ema_;
  in.continuations = planner_.optimistic && batch <= planner_.optimistic_max_batch;
  in.hit_rate = AheadHitRate();
  in.fanout = ahead_fanout_ > 0 ? ahead_fanout_ : planner_.predraft_branches;
  in.phase_overhead_ms = phase_overhead_ms_ema_;
  in.verify_slowdown = verify_overlap_.Factor();
  in.draft_slowdown = draft_overlap_.Factor();
  const PipelineDecision d = pipeline_selector_.Choose(in);
  pipeline_gain_ = d.predicted_gain;
  return d.mode;
}

namespace {

// Feeds one call of `size` that took `ms` (`overlapped`: the other worker had work in
// the same phase). The fit models a call alone: once it has data, an overlapped call
// feeds only the slowdown, measured against the fit's prediction.
template <typename Fit, typename... Size>
void ObserveCall(bool overlapped, double ms, Fit& fit, RelativeSlowdown& slowdown, Size... size) {
  const bool fitted = fit.observations() >= kMinPipelineObservations;
  if (fitted) slowdown.Observe(overlapped, ms, fit.Predict(size...));
  if (!overlapped || !fitted) fit.Observe(size..., ms);
}

}  // namespace

void Engine::ObserveVerifyCall(const PhasePlan& plan, int rows, double ms) {
  const bool overlapped =
      plan.draft.sequences_size() > 0 || plan.draft_prefill.sequences_size() > 0;
  ObserveCall(overlapped, ms, verify_fit_, verify_overlap_,
              static_cast<double>(plan.verify.sequences_size()), static_cast<double>(rows));
  if (metrics_) {
    const int batch = plan.cost_batch;
    metrics_->SetSlowdowns(verify_overlap_.Factor(), draft_overlap_.Factor(),
                           realized_.Factor(batch, SpeculationKind::kDraftWorker),
                           realized_.Factor(batch, SpeculationKind::kOther),
                           realized_.Factor(batch, SpeculationKind::kDraftTree));
  }
}

void Engine::ObserveDraftCall(const PhasePlan& plan, int proposals, double ms) {
  const bool overlapped =
      plan.verify.sequences_size() > 0 || plan.target_prefill.sequences_size() > 0;
  const bool trees = absl::c_any_of(plan.draft.sequences(),
                                    [](const v1::DraftSequence& d) { return d.tree_nodes() > 0; });
  // Chain calls and calls that build trees (several rows per depth) have their own fits,
  // so that neither prices the other.
  ObserveCall(overlapped, ms, trees ? draft_tree_fit_ : draft_fit_, draft_overlap_,
              static_cast<double>(proposals));
}

void Engine::ObserveRealized(const PhasePlan& plan, const PhaseCalibration& calibration,
                             const std::vector<int>& generated_before, double wall_ms) {
  int tokens = 0, modelled_steps = 0;
  double modelled_sum = 0;
  for (size_t i = 0; i < plan.verify_sequences.size() && i < generated_before.size(); ++i) {
    const Sequence& s = *plan.verify_sequences[i];
    tokens += s.generated() - generated_before[i];
    if (plan.verify_proposed[i] > 0 && s.planned_step().from_controller) {
      modelled_sum += s.planned_step().choice.uncalibrated_speedup;
      modelled_steps += 1;
    }
  }
  realized_.Observe(plan.cost_batch, calibration.kind, tokens, wall_ms, modelled_sum,
                    modelled_steps);
}

void Engine::ObserveDraftK(const PhasePlan& plan) {
  int steps = 0, proposed = 0;
  for (size_t i = 0; i < plan.verify_sequences.size(); ++i) {
    const Candidates& c = plan.verify_sequences[i]->candidates;
    if (c.empty() || c.site != ProposerSite::kDraftWorker) continue;
    steps += 1;
    proposed += plan.verify_proposed[i];
  }
  if (steps == 0) return;
  const double k = static_cast<double>(proposed) / steps;
  draft_k_ema_ = draft_k_ema_ == 0 ? k : 0.9 * draft_k_ema_ + 0.1 * k;
}

void Engine::ObserveAheadHits(const PhasePlan& plan, const std::vector<int>& had_ahead) {
  bool looked_up = false;
  for (size_t i = 0; i < plan.verify_sequences.size(); ++i) {
    const Sequence& s = *plan.verify_sequences[i];
    if (i < had_ahead.size() && had_ahead[i] > 0 && !s.finished()) {
      const bool hit = !s.candidates.empty() && s.candidates.site == ProposerSite::kDraftWorker;
      ahead_lookups_ = kAheadForgetting * ahead_lookups_ + 1;
      ahead_hits_ = kAheadForgetting * ahead_hits_ + (hit ? 1 : 0);
      ahead_fanout_ = 0.9 * ahead_fanout_ + 0.1 * had_ahead[i];
      looked_up = true;
      if (metrics_) metrics_->RecordSpeculationCacheLookup(hit, had_ahead[i]);
    }
  }
  if (!looked_up) {
    // Evidence ages while nothing is drafted ahead, so a hit rate measured long ago
    // relaxes to the prior and lockstep is tried again.
    ahead_lookups_ *= kAheadForgetting;
    ahead_hits_ *= kAheadForgetting;
  }
}

int Engine::PredraftTokenBudget(int batch) const {
  if (verify_fit_.observations() < kMinPipelineObservations ||
      draft_fit_.observations() < kMinPipelineObservations || !(draft_fit_.slope() > 0)) {
    return -1;
  }
  // The verify of n sequences of K + 1 rows next to the draft, against the draft call
  // that already pre-drafts each sequence's likeliest outcome (about K + 1 tokens).
  const double n = std::max(batch, 1), k = draft_k_ema_;
  const double verify = verify_overlap_.Factor() * verify_fit_.Predict(n, n * (k + 1));
  const double draft = draft_overlap_.Factor() * draft_fit_.Predict(n * (k + 1));
  const double tokens = (verify - draft) / (draft_overlap_.Factor() * draft_fit_.slope());
  return static_cast<int>(std::clamp(tokens, 0.0, 1e6));
}

void Engine::SetTreeCostTerms(int batch, const spec::CostModel& chain_costs, double exposed,
                              WorkerAvailability* workers) const {
  // Until its own fit has data (and with fixed costs, which have no tree term) a tree's
  // draft call is priced as a chain's of its depth: optimistic, so that the tree option
  // is tried and measured.
  workers->draft_worker_tree_factor = 1 / exposed;
  workers->draft_worker_tree_overhead = chain_costs.overhead;
  if (!options_.measured_costs || draft_tree_fit_.observations() < kMinPipelineObservations ||
      !(chain_costs.draft_cost > 0)) {
    return;
  }
  const spec::CostModel tree = spec::BatchCostModel(verify_fit_, draft_tree_fit_, batch,
                                                    chain_costs, phase_overhead_ms_ema_);
  workers->draft_worker_tree_factor = tree.draft_cost / chain_costs.draft_cost / exposed;
  workers->draft_worker_tree_overhead = tree.overhead;
}

double Engine::AheadHitRate() const {
  return (ahead_hits_ + kAheadPriorHits) / (ahead_lookups_ + kAheadPriorLookups);
}

void Engine::SetCostTerms(int batch, WorkerAvailability* workers) const {
  const spec::CostModel costs =
      options_.measured_costs ? spec::BatchCostModel(verify_fit_, draft_fit_, batch,
                                                     options_.fixed_costs, phase_overhead_ms_ema_)
                              : options_.fixed_costs;
  workers->verify_cost = costs.verify_cost;
  // In lockstep with pre-drafting, a step whose candidates were pre-drafted (share h,
  // measured) runs no draft phase: its draft time and phase overhead are hidden behind
  // the verify before it. What overlap still costs (slower verifies next to the draft)
  // reaches the controller through the realized-speedup factor.
  const bool predrafting = workers->pipeline_mode == PipelineMode::kLockstep &&
                           planner_.optimistic && batch <= planner_.optimistic_max_batch;
  const double exposed = options_.measured_costs && predrafting ? 1 - AheadHitRate() : 1.0;
  workers->draft_worker_cost = costs.draft_cost * exposed;
  SetTreeCostTerms(batch, costs, exposed, workers);
  workers->draft_worker_overhead = costs.overhead * exposed;
  workers->draft_overlap_cost =
      options_.measured_costs ? std::max(0.0, verify_overlap_.Factor() - 1) : 0.0;
  workers->predraft_token_budget = PredraftTokenBudget(batch);
  workers->draft_worker_cost_factor =
      options_.measured_costs ? realized_.Factor(batch, SpeculationKind::kDraftWorker) : 1.0;
  workers->other_cost_factor =
      options_.measured_costs ? realized_.Factor(batch, SpeculationKind::kOther) : 1.0;
  workers->draft_worker_tree_cost_factor =
      options_.measured_costs ? realized_.Factor(batch, SpeculationKind::kDraftTree) : 1.0;
  // Feeding the draft (a switch cost, per token, priced for the whole batch): measured only.
  workers->draft_worker_feed_cost =
      options_.measured_costs ? spec::BatchFeedCost(verify_fit_, draft_feed_fit_, batch,
                                                    phase_overhead_ms_ema_, kMinFeedObservations)
                              : 0.0;
  VLOG_EVERY_N(1, 200) << "cost terms, batch " << batch << ": verify " << verify_fit_.intercept()
                       << " + " << verify_fit_.per_sequence() << "/sequence + "
                       << verify_fit_.per_row() << "/row ms, draft " << draft_fit_.intercept()
                       << " + " << draft_fit_.slope() << "/token ms, feed "
                       << draft_feed_fit_.slope() << "/token ms, h " << phase_overhead_ms_ema_
                       << " ms, nu(4) " << (workers->verify_cost ? workers->verify_cost(4) : 1.0)
                       << ", c " << workers->draft_worker_cost << ", o "
                       << workers->draft_worker_overhead << ", overlap slowdowns "
                       << verify_overlap_.Factor() << "/" << draft_overlap_.Factor()
                       << ", speculation cost factor "
                       << realized_.Factor(batch, SpeculationKind::kDraftWorker)
                       << "; tree option: draft x" << workers->draft_worker_tree_factor << ", o "
                       << workers->draft_worker_tree_overhead << ", cost factor "
                       << workers->draft_worker_tree_cost_factor << " (realized "
                       << realized_.Ratio(batch, SpeculationKind::kDraftTree) << ", chains "
                       << realized_.Ratio(batch, SpeculationKind::kDraftWorker) << ")";
}

}  // namespace tandem::coordinator
