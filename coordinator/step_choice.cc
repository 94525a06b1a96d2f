#include "coordinator/step_choice.h"

#include <glog/logging.h>

#include <algorithm>
#include <functional>

#include "spec/speculation_controller.h"

namespace tandem::coordinator {

// Whether `s`'s chosen draft-worker proposer is too far behind to draft this step.
bool NeedsCatchUp(Sequence& s, const StepChoice& c, const PlannerOptions& o) {
  return s.proposer(c.slot).CatchUpTokens(s, s.proposer_state(c.slot)) > o.catch_up_min_tokens;
}

// The step runs plain while the chosen proposer gets ready (`reason`: a draft catching
// up, or a target-leader method whose candidates come with this step's verify): the
// controller's choice is deferred (docs/architecture.md §3).
void DeferChoice(Sequence& s, const char* reason) {
  PlannedStep planned = s.planned_step();
  planned.choice.deferred = true;
  planned.off_reason = reason;
  s.SetPlannedStep(planned);
}

namespace {

// The controller's view of each chain entry this step: usable or not, K cap, costs.
spec::ControllerInputs ControllerView(const Sequence& s, int cap, int running,
                                      const PlannerOptions& o, const WorkerAvailability& workers,
                                      const char** preferred_unusable) {
  spec::ControllerInputs in;
  in.verify_cost = workers.verify_cost;
  in.tokens_left = s.remaining();
  in.batch = running;
  for (int slot = 0; slot < s.chain_size(); ++slot) {
    const Proposer& p = s.proposer(slot);
    const char* unusable = p.Unusable(s, s.proposer_state(slot), workers, o);
    if (slot == 0) *preferred_unusable = unusable;
    const bool on_draft_worker = p.capabilities().site == ProposerSite::kDraftWorker;
    spec::ControllerOption option;
    option.usable = unusable == nullptr;
    option.max_k = std::max(0, std::min(cap, p.MaxK(s, o)));
    option.draft_cost = on_draft_worker ? workers.draft_worker_cost : 0.0;
    option.overhead = on_draft_worker ? workers.draft_worker_overhead : 0.0;
    option.cost_factor =
        on_draft_worker ? workers.draft_worker_cost_factor : workers.other_cost_factor;
    option.server = s.server_acceptance(slot, false);
    option.nodes_per_depth = s.nodes_per_depth(slot, false);
    if (on_draft_worker) {
      option.switch_cost =
          p.CatchUpTokens(s, s.proposer_state(slot)) * workers.draft_worker_feed_cost;
    }
    in.options.push_back(option);
    // The tree option: the same proposer and worker, its own acceptance and node count,
    // and a draft call that costs draft_worker_tree_factor times a chain's.
    spec::ControllerOption tree = option;
    tree.usable = option.usable && p.OffersTreeChoice(s, o);
    tree.tree = true;
    tree.nodes_per_depth = s.nodes_per_depth(slot, true);
    // Its draft call costs the factor times a chain's of the same depth, whatever the
    // nodes kept; the controller charges c per verified node.
    tree.draft_cost =
        option.draft_cost * workers.draft_worker_tree_factor / std::max(1.0, tree.nodes_per_depth);
    if (on_draft_worker) {
      tree.overhead = workers.draft_worker_tree_overhead;
      tree.cost_factor = workers.draft_worker_tree_cost_factor;
    }
    tree.server = s.server_acceptance(slot, true);
    in.options.push_back(tree);
  }
  return in;
}

// A fixed K: the first usable chain entry, K capped by it (its tree when it offers one,
// as the server's tree budget asks).
StepChoice FixedChoice(const spec::ControllerInputs& in, int k) {
  StepChoice c;
  for (int option = 0; option < static_cast<int>(in.options.size()); option += kShapesPerSlot) {
    if (!in.options[option].usable) continue;
    const bool tree = in.options[option + 1].usable;
    return {option / kShapesPerSlot, std::min(k, in.options[option].max_k), tree};
  }
  return c;
}

// `running`: the phase's sequences; the batch the choice is priced and capped at is
// workers.cost_batch when set (the recent peak, coordinator/planning_batch.h).
StepChoice Decide(Sequence& s, int running, const PlannerOptions& o,
                  const WorkerAvailability& workers, PlannedStep* planned) {
  const ResolvedSpeculation& spec = s.request().speculation;
  const int length = static_cast<int>(s.tokens().size());
  // Proposals past the last token we may generate, or past the context, are useless.
  const int cap = std::min({o.max_k, s.remaining() - 1, o.context_length - length});
  if (s.chain_size() == 0) {
    planned->off_reason = "not_requested";
    return {};
  }
  if (cap <= 0) {
    planned->off_reason = "length";
    return {};
  }
  if (workers.cost_batch > 0) running = workers.cost_batch;
  if (!spec.fixed_k.has_value() && running > o.speculation_max_batch) {
    planned->off_reason = "batch_limit";
    return {-1, 0, false, "batch_limit"};
  }
  const char* preferred_unusable = nullptr;
  const spec::ControllerInputs in =
      ControllerView(s, cap, running, o, workers, &preferred_unusable);
  StepChoice c;
  if (spec.fixed_k.has_value()) {
    c = FixedChoice(in, *spec.fixed_k);
  } else {
    planned->choice = s.controller().Choose(in);
    planned->from_controller = true;
    c.slot = planned->choice.option < 0 ? -1 : planned->choice.option / kShapesPerSlot;
    c.tree = planned->choice.option >= 0 && planned->choice.option % kShapesPerSlot == 1;
    c.k = planned->choice.k;
  }
  c.fallback = preferred_unusable;
  if (c.slot < 0 || c.k <= 0) {
    c.slot = -1;
    c.k = 0;
    c.tree = false;
    planned->off_reason = planned->choice.off_by_model    ? "controller"
                          : preferred_unusable != nullptr ? preferred_unusable
                                                          : "length";
  }
  return c;
}

StepChoice ChooseProposer(Sequence& s, int running, const PlannerOptions& o,
                          const WorkerAvailability& workers) {
  PlannedStep planned;
  const StepChoice c = Decide(s, running, o, workers, &planned);
  s.SetPlannedStep(planned);
  // One line per sequence and decision at --v=3 (a trace of what the controller chose
  // and why, next to the phase lines of --v=2).
  VLOG(3) << "choice: sequence " << s.id() << " batch " << running << "/" << workers.cost_batch
          << " slot " << c.slot << (c.tree ? " tree" : " chain") << " k " << c.k << " S "
          << planned.choice.speedup << " S_model " << planned.choice.uncalibrated_speedup
          << (planned.choice.probe ? " probe" : "") << " off "
          << (planned.off_reason != nullptr ? planned.off_reason : "-");
  return c;
}

// Whether `c` makes `s` draft on the draft worker this phase (not a catch-up feed).
bool DraftsThisPhase(Sequence& s, const StepChoice& c, const PlannerOptions& o) {
  return c.slot >= 0 && s.proposer(c.slot).capabilities().site == ProposerSite::kDraftWorker &&
         s.candidates.empty() && !NeedsCatchUp(s, c, o);
}

// Whether `c` makes the draft worker work for `s` this phase (a draft, a pre-draft of
// its next step, or a catch-up feed).
bool UsesDraftWorker(Sequence& s, const StepChoice& c) {
  return c.slot >= 0 && c.k > 0 &&
         s.proposer(c.slot).capabilities().site == ProposerSite::kDraftWorker;
}

}  // namespace

std::vector<StepChoice> ChooseSteps(const std::vector<Sequence*>& running, const PlannerOptions& o,
                                    const WorkerAvailability& workers, bool sequential) {
  const int n = static_cast<int>(running.size());
  std::vector<StepChoice> choices;
  int drafting = 0, involved = 0;
  for (Sequence* s : running) {
    choices.push_back(ChooseProposer(*s, n, o, workers));
    drafting += DraftsThisPhase(*s, choices.back(), o);
    involved += UsesDraftWorker(*s, choices.back());
  }
  // Who shares what the batch pays for the draft's work: in a sequential phase the draft
  // phase's fixed cost o (by the sequences that draft), in an overlapped one the slower
  // verify next to the draft, n (sigma - 1) (by the sequences the draft works for).
  WorkerAvailability shared = workers;
  std::function<bool(Sequence&, const StepChoice&)> shares;
  if (sequential && drafting > 0 && drafting < n) {
    shared.draft_worker_overhead *= static_cast<double>(n) / drafting;
    shared.draft_worker_tree_overhead *= static_cast<double>(n) / drafting;
    shares = [&o](Sequence& s, const StepChoice& c) { return DraftsThisPhase(s, c, o); };
  } else if (!sequential && involved > 0 && workers.draft_overlap_cost > 0) {
    const double overlap = workers.draft_overlap_cost * n / involved;
    shared.draft_worker_overhead += overlap;
    shared.draft_worker_tree_overhead += overlap;
    shares = UsesDraftWorker;
  } else {
    return choices;
  }
  for (int i = 0; i < n; ++i) {
    if (shares(*running[i], choices[i])) choices[i] = ChooseProposer(*running[i], n, o, shared);
  }
  return choices;
}

}  // namespace tandem::coordinator
