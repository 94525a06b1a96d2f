// Which proposer and K each running sequence uses in a phase (the step planner's first
// decision, docs/architecture.md §3), free of I/O. A fixed-K request takes the first
// usable entry of its chain with K capped by it; otherwise the sequence's speculation
// controller (spec/speculation_controller.h) picks among the usable entries, K = 0
// included, from their K caps (tokens left before max_new_tokens, both contexts, the
// proposer's MaxK) and the phase's cost terms (WorkerAvailability); a proposer that
// offers a chain or a tree is two options, the tree with its own acceptance, node count
// and draft cost (draft_worker_tree_factor). Adaptive requests do
// not speculate above speculation_max_batch running sequences. Both the cap and the
// controller's batch are the phase's WorkerAvailability::cost_batch when set (the recent
// peak of the running count), else its running count. Each decision, and why a
// step does not speculate, is recorded in the sequence's PlannedStep.
#ifndef TANDEM_COORDINATOR_STEP_CHOICE_H_
#define TANDEM_COORDINATOR_STEP_CHOICE_H_

#include <vector>

#include "coordinator/phase_plan.h"
#include "coordinator/sequence.h"

namespace tandem::coordinator {

// The proposer a sequence uses this phase: a slot of its chain (-1 = none), K and, for
// a proposer that offers the choice, whether it proposes a tree.
struct StepChoice {
  int slot = -1;
  int k = 0;
  bool tree = false;
  // Why the preferred proposer is not used this step (nullptr: it is, or none was
  // requested): a proposer's Unusable() reason or "batch_limit".
  const char* fallback = nullptr;
};

// Every running sequence's choice, parallel to `running` (each sequence's PlannedStep
// is set). In a sequential phase a draft phase holds up the whole batch, so when only
// some sequences would draft, they decide again with the draft's fixed cost o shared
// among them alone (o * n / drafting): a lone drafter in a batch of plain sequences
// pays the others' wait. In an overlapped phase the draft's work slows the verify of
// the whole batch (WorkerAvailability::draft_overlap_cost), so the sequences the draft
// works for decide again with that cost, n (sigma - 1), shared among them as a fixed
// cost per step: speculating for one sequence must pay for everyone's slower step.
std::vector<StepChoice> ChooseSteps(const std::vector<Sequence*>& running, const PlannerOptions& o,
                                    const WorkerAvailability& workers, bool sequential);

// Whether `s`'s chosen draft-worker proposer (`c.slot` >= 0) is more than
// catch_up_min_tokens behind, too far to draft this step.
bool NeedsCatchUp(Sequence& s, const StepChoice& c, const PlannerOptions& o);

// The step runs plain while the chosen proposer gets ready (`reason`, a static string:
// "draft_catch_up", "candidates_pending"): the controller's choice is marked deferred
// (it moves neither the incumbent nor the probe budget) and `reason` is the off reason.
void DeferChoice(Sequence& s, const char* reason);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_STEP_CHOICE_H_
