// Scheduling policy of one engine phase, free of I/O so it is unit-tested with plain
// Sequence objects.
//
// A phase is what the engine runs concurrently in one round trip: on the target, a
// Verify over the sequences whose proposals are ready (plus prefill chunks of long
// prompts); on the draft, a Draft over the sequences that need proposals (plus
// optimistic continuations of sequences being verified). The modes (docs/architecture.md
// §3), of which the engine's PipelineModeSelector (coordinator/pipeline_mode.h) picks
// one from the measured call-time fits (WorkerAvailability::pipeline_mode):
//  * sequential (pipelining off, or the fits predict no gain from overlap): draft phase,
//    then verify phase, for all sequences;
//  * ping-pong (>= 2 running): sequences fall into two groups by construction — those
//    verified in a phase need drafts in the next one while the others, drafted
//    meanwhile, are verified; the planner splits groups in two when one side would be
//    idle. Without 2 sequences or the draft it runs lockstep instead;
//  * lockstep with optimistic continuation: all sequences are verified together, and
//    while the target verifies d1..dK the otherwise idle draft proposes K+1 more tokens
//    assuming all are accepted; they are used when the guess holds, else a short draft
//    phase follows. Sequences needing no draft work are verified during a draft phase.
// Every sequence's proposer and K are chosen per phase (coordinator/step_choice.h): a
// fixed-K request takes the first usable entry of its chain; otherwise the sequence's
// speculation controller
// (spec/speculation_controller.h) picks among the usable entries (AUTO: any of them),
// K = 0 included, from their K caps (tokens left, both contexts, the proposer's MaxK)
// and the phase's cost terms (WorkerAvailability: nu(K), and c, o of draft-worker
// proposers). Speculation is off above speculation_max_batch running sequences for
// adaptive requests. A chosen target-leader proposer fits its candidates (those it
// returned with the last verify) to the phase's verify cost (Proposer::FitCandidates:
// Lookahead sizes W and G there). The planner records the decision and why a step does not
// speculate in the sequence's PlannedStep. The draft cannot be used when it is down,
// when admission found no room in its KV cache for the sequence (draft_allowed), or
// for one step after it rejected a batch with the sequence (skip_draft_once).
// Budgets: each side's prefill tokens per phase are capped at prefill_budget and its
// max_batch_tokens; Draft and Verify rows at the side's max_batch_tokens.
#ifndef TANDEM_COORDINATOR_STEP_PLANNER_H_
#define TANDEM_COORDINATOR_STEP_PLANNER_H_

#include <vector>

#include "coordinator/phase_plan.h"
#include "coordinator/sequence.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::coordinator {

// Plans the next phase for `running` (unfinished sequences, admission order). Asks
// coordinator-site proposers for the candidates of the sequences it verifies, asks
// draft-worker proposers for their work, and counts fallback steps.
// Whether a phase over `running` may pipeline: no request turned pipelining off, and
// the server default (`server_default`) is on or a request asked for it.
bool PipeliningWanted(const std::vector<Sequence*>& running, bool server_default);

PhasePlan PlanPhase(const std::vector<Sequence*>& running, const PlannerOptions& options,
                    const WorkerAvailability& workers);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_STEP_PLANNER_H_
