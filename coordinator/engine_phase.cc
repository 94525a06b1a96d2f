// Engine: one phase's worker calls, the application of their results, and what a
// failed draft call does (engine_failures.cc: the target's; engine.h: the failure model).
#include <glog/logging.h>

#include <algorithm>
#include <future>
#include <optional>

#include "absl/strings/str_cat.h"
#include "coordinator/engine.h"

namespace tandem::coordinator {
namespace {

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// Moving average of a phase's coordinator time (a term of every step's cost).
void UpdateEma(double* ema, absl::Duration d) {
  const double ms = Ms(d);
  *ema = *ema == 0 ? ms : 0.9 * *ema + 0.1 * ms;
}

// Parallel to plan.verify_sequences: whether the sequence had drafted-ahead proposals
// (a continuation) drafted in this phase.
// Per verified sequence of `plan`: the outcomes pre-drafted for it (continuation entries)
// in this phase.
std::vector<int> AheadDrafted(const PhasePlan& plan) {
  std::vector<int> ahead(plan.verify_sequences.size(), 0);
  for (size_t j = 0; j < plan.draft_sequences.size(); ++j) {
    if (!plan.draft_is_continuation[j]) continue;
    for (size_t i = 0; i < ahead.size(); ++i) {
      ahead[i] += plan.verify_sequences[i] == plan.draft_sequences[j] ? 1 : 0;
    }
  }
  return ahead;
}

// "N sequences, R rows, K max proposals" of a batch, for logs.
template <typename Request>
std::string BatchShape(const Request& request) {
  int rows = 0, max_k = 0, max_end = 0;
  for (const auto& s : request.sequences()) {
    rows += s.tokens_size();
    int k = 0;
    if constexpr (std::is_same_v<Request, v1::DraftRequest>) k = s.num_draft_tokens();
    if constexpr (std::is_same_v<Request, v1::VerifyRequest>) k = s.proposals_size();
    max_k = std::max(max_k, k);
    max_end = std::max<int>(max_end, s.start_position() + s.tokens_size() + k);
  }
  return absl::StrCat(request.sequences_size(), " sequences, ", rows, " fed tokens, K up to ",
                      max_k, ", last position ", max_end - 1);
}

// Whether every entry of a Draft or Verify call feeds at most the 1-2 committed tokens a
// decoding step leaves uncached. Calls that also feed a prompt or a catch-up are not
// what the cost fits model (a fed token costs far less than a decoded row), so they
// are not observed.
template <typename Request>
bool DecodeShaped(const Request& request) {
  for (const auto& s : request.sequences()) {
    if (s.tokens_size() > 2) return false;
  }
  return request.sequences_size() > 0;
}

// What a verify carries for the candidates' method besides tokens and parents (the
// planner builds those): explicit positions, and, when the step's choice is a
// target-leader proposer, its next-candidates request, so that such a method costs one
// round trip per step and nothing on the steps it is not chosen for.
void AddProposerFields(const PlannerOptions& options, PhasePlan& plan) {
  for (int i = 0; i < plan.verify.sequences_size(); ++i) {
    const Sequence& s = *plan.verify_sequences[i];
    v1::VerifySequence* v = plan.verify.mutable_sequences(i);
    const std::vector<int32_t>& positions = s.candidates.positions;
    if (!positions.empty() && static_cast<int>(positions.size()) == v->proposals_size()) {
      v->mutable_proposal_positions()->Assign(positions.begin(), positions.end());
    }
    const int slot = i < static_cast<int>(plan.verify_slots.size()) ? plan.verify_slots[i] : -1;
    if (slot < 0) continue;
    const Proposer& p = s.proposer(slot);
    const int max_nodes = p.MaxK(s, options);
    if (p.capabilities().site != ProposerSite::kTargetLeader || max_nodes < 1) continue;
    v1::NextCandidatesRequest* next = v->mutable_next_candidates();
    next->set_method(p.method());
    next->set_max_nodes(max_nodes);
    // Nodes of the next tree pay for their rows at this step's rate (trees fade where
    // rows are dear); a request that fixed its node count gets that many.
    if (!s.request().speculation.fixed_k.has_value()) {
      next->set_min_node_value(static_cast<float>(
          spec::NodeValueThreshold(s.PlannedRate(), plan.verify_cost, max_nodes)));
    }
  }
}

// One line per phase at --v=2 (a trace to study phase costs offline): the batch and how
// many of it may speculate (have proposers), the verify's sequences, rows (fed tokens and
// proposals) and proposals, the draft's entries and prefill tokens, target prefills, the mode, and
// the workers' and phase's times.
void LogPhase(const PhasePlan& plan, const std::vector<std::shared_ptr<Sequence>>& running,
              absl::Duration workers_wall, absl::Duration phase_wall) {
  int rows = 0, proposed = 0, fed = 0, speculating = 0;
  for (const auto& s : running) speculating += s->chain_size() > 0 ? 1 : 0;
  for (const v1::VerifySequence& v : plan.verify.sequences()) {
    rows += v.tokens_size() + v.proposals_size();
    proposed += v.proposals_size();
  }
  for (const v1::PrefillSequence& p : plan.draft_prefill.sequences()) fed += p.tokens_size();
  LOG(INFO) << "phase: running " << running.size() << " speculating " << speculating << " verify "
            << plan.verify.sequences_size() << " rows " << rows << " proposed " << proposed
            << " draft " << plan.draft.sequences_size() << " fed " << fed << " tprefill "
            << plan.target_prefill.sequences_size() << " mode " << PipelineModeLabel(plan.mode)
            << " workers_ms " << Ms(workers_wall) << " phase_ms " << Ms(phase_wall);
}

}  // namespace

struct Engine::TargetResult {
  absl::Duration wall;  // The whole task: prefill and verify calls.
  absl::Status prefill_status;
  std::optional<absl::StatusOr<v1::VerifyResponse>> verify;
  absl::Duration verify_wall;
};

struct Engine::DraftResult {
  absl::Duration wall;  // The whole task: prefill and draft calls.
  absl::Status prefill_status;
  absl::Duration prefill_wall;
  std::optional<absl::StatusOr<v1::DraftResponse>> draft;
  absl::Duration draft_wall;
};

Sequence* Engine::FindRunning(uint64_t id) const {
  for (const auto& s : running_) {
    if (s->id() == id) return s.get();
  }
  return nullptr;
}

Engine::TargetResult Engine::CallTarget(const PhasePlan& plan) {
  const absl::Time start = absl::Now();
  TargetResult r;
  if (plan.target_prefill.sequences_size() > 0) {
    r.prefill_status = target_->Prefill(plan.target_prefill).status();
  }
  if (plan.verify.sequences_size() > 0 && r.prefill_status.ok()) {
    const absl::Time t = absl::Now();
    r.verify = target_->Verify(plan.verify);
    r.verify_wall = absl::Now() - t;
  }
  r.wall = absl::Now() - start;
  return r;
}

Engine::DraftResult Engine::CallDraft(const PhasePlan& plan) {
  const absl::Time start = absl::Now();
  DraftResult r;
  if (plan.draft_prefill.sequences_size() > 0) {
    const absl::Time t = absl::Now();
    r.prefill_status = draft_->Prefill(plan.draft_prefill).status();
    r.prefill_wall = absl::Now() - t;
  }
  if (plan.draft.sequences_size() > 0 && r.prefill_status.ok()) {
    const absl::Time t = absl::Now();
    r.draft = draft_->Draft(plan.draft);
    r.draft_wall = absl::Now() - t;
  }
  r.wall = absl::Now() - start;
  return r;
}

void Engine::RunPhase(PhasePlan& plan) {
  const absl::Time phase_start = absl::Now();
  const PhaseCalibration calibration = CalibrationOf(plan);
  std::vector<int> generated_before;
  for (const Sequence* s : plan.verify_sequences) generated_before.push_back(s->generated());
  AddProposerFields(planner_, plan);
  const bool target_work =
      plan.target_prefill.sequences_size() > 0 || plan.verify.sequences_size() > 0;
  const bool draft_work =
      plan.draft_prefill.sequences_size() > 0 || plan.draft.sequences_size() > 0;
  // The engine thread makes one worker's calls itself (the target's when both work): a
  // thread hand-off each way less on the phase's critical path. Calls to one worker
  // stay in order with the releases queued on its executor.
  std::future<DraftResult> draft_future;
  std::optional<DraftResult> draft_result;
  std::optional<TargetResult> target_result;
  if (draft_work && target_work) {
    draft_future = draft_exec_.Submit([this, &plan] { return CallDraft(plan); });
  } else if (draft_work) {
    draft_result = draft_exec_.RunHere([this, &plan] { return CallDraft(plan); });
  }
  if (target_work) {
    target_result = target_exec_.RunHere([this, &plan] { return CallTarget(plan); });
  }
  if (draft_future.valid()) draft_result = draft_future.get();

  CoordinatorMetrics::StepLatency latency;
  // Draft results first: a continuation must be in place before its verify is applied.
  absl::Duration workers_wall;
  if (draft_result.has_value()) {
    workers_wall = draft_result->wall;
    ApplyDraftResult(*draft_result, plan, &latency);
  }
  if (target_result.has_value()) {
    workers_wall = std::max(workers_wall, target_result->wall);
    ApplyTargetResult(*target_result, plan, &latency);
  }
  // The coordinator's own time in the phase (a term of every step's cost).
  UpdateEma(&phase_overhead_ms_ema_,
            std::max(absl::ZeroDuration(), absl::Now() - phase_start - workers_wall));
  if (calibration.observed) {
    ObserveRealized(plan, calibration, generated_before, Ms(absl::Now() - phase_start));
  }
  if (VLOG_IS_ON(2)) LogPhase(plan, running_, workers_wall, absl::Now() - phase_start);
  if (metrics_) {
    const double phase_ms = Ms(absl::Now() - phase_start);
    double worker_ms = 0;
    if (latency.verify_ms) {
      worker_ms = std::max(worker_ms, *latency.verify_ms + latency.rpc_ms.value_or(0));
    }
    if (latency.draft_ms) worker_ms = std::max(worker_ms, *latency.draft_ms);
    latency.overhead_ms = std::max(0.0, phase_ms - worker_ms);
    metrics_->RecordStepLatency(latency);
    metrics_->SetBusyFractions(draft_busy_fraction(), target_busy_fraction());
  }
}

void Engine::ApplyDraftResult(const DraftResult& r, PhasePlan& plan,
                              CoordinatorMetrics::StepLatency* latency) {
  if (r.draft.has_value() && r.draft->ok()) {
    int proposals = 0;
    for (const v1::DraftSequence& d : plan.draft.sequences()) proposals += d.num_draft_tokens();
    if (DecodeShaped(plan.draft)) ObserveDraftCall(plan, proposals, Ms(r.draft_wall));
  }
  if (r.prefill_status.ok() && plan.draft_prefill.sequences_size() > 0) {
    int fed = 0;
    for (const v1::PrefillSequence& p : plan.draft_prefill.sequences()) fed += p.tokens_size();
    draft_feed_fit_.Observe(fed, Ms(r.prefill_wall));
  }
  absl::Status failure = r.prefill_status;
  if (failure.ok() && r.draft.has_value() && !r.draft->ok()) failure = r.draft->status();
  if (!failure.ok()) {
    OnDraftFailure(failure, plan);
    return;
  }
  for (int i = 0; i < plan.draft_prefill.sequences_size(); ++i) {
    Sequence* s = plan.draft_prefill_sequences[i];
    const int slot = plan.draft_prefill_slots[i];
    s->proposer(slot).OnPrefilled(*s, s->proposer_state(slot), plan.draft_prefill.sequences(i));
  }
  if (!r.draft.has_value()) return;
  const v1::DraftResponse& resp = **r.draft;
  latency->draft_ms = resp.compute_ms();
  for (int i = 0; i < resp.sequences_size() && i < plan.draft.sequences_size(); ++i) {
    Sequence* s = plan.draft_sequences[i];
    const int slot = plan.draft_slots[i];
    std::optional<Candidates> c =
        s->proposer(slot).OnDrafted(*s, s->proposer_state(slot), plan.draft.sequences(i),
                                    resp.sequences(i), plan.draft_is_continuation[i]);
    if (c.has_value()) s->candidates = *std::move(c);
  }
}

void Engine::ApplyTargetResult(const TargetResult& r, PhasePlan& plan,
                               CoordinatorMetrics::StepLatency* latency) {
  if (r.verify.has_value() && r.verify->ok()) {
    int rows = 0;
    for (const v1::VerifySequence& v : plan.verify.sequences()) {
      rows += v.tokens_size() + v.proposals_size();
    }
    if (DecodeShaped(plan.verify)) ObserveVerifyCall(plan, rows, Ms(r.verify_wall));
  }
  const absl::Time now = absl::Now();
  if (!r.prefill_status.ok()) {
    std::vector<Sequence*> batch;
    for (const auto& p : plan.target_prefill.sequences()) {
      if (Sequence* s = FindRunning(p.sequence_id())) batch.push_back(s);
    }
    if (!IsTransportFailure(r.prefill_status) && !absl::IsNotFound(r.prefill_status)) {
      RecordRejectedBatch("target", r.prefill_status, BatchShape(plan.target_prefill));
    }
    OnTargetFailure(r.prefill_status, batch, now);
    return;
  }
  for (const v1::PrefillSequence& p : plan.target_prefill.sequences()) {
    if (Sequence* s = FindRunning(p.sequence_id())) {
      s->target_cached = p.start_position() + p.tokens_size();
    }
  }
  if (!r.verify.has_value()) return;
  if (!r.verify->ok()) {
    const absl::Status& status = r.verify->status();
    if (!IsTransportFailure(status) && !absl::IsNotFound(status)) {
      RecordRejectedBatch("target", status, BatchShape(plan.verify));
    }
    OnTargetFailure(status, plan.verify_sequences, now);
    return;
  }
  const v1::VerifyResponse& resp = **r.verify;
  latency->verify_ms = resp.compute_ms();
  latency->collective_ms = resp.collective_ms();
  latency->rpc_ms = std::max(0.0, Ms(r.verify_wall) - resp.compute_ms());
  const std::vector<int> had_ahead = AheadDrafted(plan);
  ObserveDraftK(plan);
  for (int i = 0; i < resp.sequences_size() && i < plan.verify.sequences_size(); ++i) {
    Sequence* s = plan.verify_sequences[i];
    const int before = s->generated();
    const SequenceStats stats_before = s->stats();
    const v1::SpeculationMethod method = s->candidates.method;
    s->OnVerified(resp.sequences(i), plan.verify_proposed[i], now);
    if (metrics_) {
      metrics_->RecordStep({method,
                            s->stats().draft_tokens_proposed - stats_before.draft_tokens_proposed,
                            s->stats().draft_tokens_accepted - stats_before.draft_tokens_accepted,
                            s->generated() - before, plan.verify.sequences(i).proposals_size()});
      const PlannedStep& planned = s->planned_step();
      metrics_->RecordControllerStep(
          s->last_step_decision(), plan.verify_proposed[i],
          planned.from_controller ? std::optional<double>(planned.choice.speedup) : std::nullopt);
    }
  }
  ObserveAheadHits(plan, had_ahead);
}

void Engine::OnDraftFailure(const absl::Status& status, const PhasePlan& plan) {
  // What the draft holds for this batch is unknown now: re-prefill it.
  std::vector<Sequence*> batch = plan.draft_sequences;
  batch.insert(batch.end(), plan.draft_prefill_sequences.begin(),
               plan.draft_prefill_sequences.end());
  for (Sequence* s : batch) ResetProposers(*s, ProposerSite::kDraftWorker);
  if (absl::IsNotFound(status)) {
    LOG(WARNING) << "draft lost sequences, re-prefilling: " << status;
    return;
  }
  if (IsTransportFailure(status)) {
    LOG(WARNING) << "draft worker unavailable, continuing without it: " << status;
    draft_available_ = false;
    if (metrics_) metrics_->SetDraftAvailable(false);
    return;
  }
  // The draft answered, rejecting the batch: it is up. Only this batch's sequences
  // step once without it.
  RecordRejectedBatch("draft", status,
                      plan.draft.sequences_size() > 0
                          ? BatchShape(plan.draft)
                          : absl::StrCat("prefill: ", BatchShape(plan.draft_prefill)));
  for (Sequence* s : batch) s->skip_draft_once = true;
}

}  // namespace tandem::coordinator
