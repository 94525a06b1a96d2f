// Scheduling policy of one engine phase, free of I/O so it is unit-tested with plain
// Sequence objects.
//
// A phase is what the engine runs concurrently in one round trip: on the target, a
// Verify over the sequences whose proposals are ready (plus prefill chunks of long
// prompts); on the draft, a Draft over the sequences that need proposals (plus
// optimistic continuations of sequences being verified). The modes (DESIGN.md §3):
//  * sequential (pipelining off): draft phase, then verify phase, for all sequences;
//  * ping-pong (pipelining on, and drafting a micro-batch costs at least
//    pingpong_min_ratio of verifying it, as measured): sequences fall into two groups
//    by construction — those verified in a phase need drafts in the next one while
//    the others, drafted meanwhile, are verified; the planner splits groups in two
//    when one side would be idle. Splitting doubles the number of target steps, so
//    it pays only when the draft side is a real share of the step time;
//  * lockstep with optimistic continuation (pipelining on, drafting cheap next to
//    verifying): all sequences are verified together, and while the target verifies
//    d1..dK the otherwise idle draft proposes K+1 more tokens assuming all are
//    accepted; they are used when the guess holds, else a short draft phase follows.
// Every sequence's proposer is chosen per phase: its method (AUTO = draft when the
// draft can be used for it, else prompt lookup), its K (fixed or adaptive, bounded by
// the tokens left and both contexts), speculation off above speculation_max_batch
// running sequences for adaptive-K requests. The draft cannot be used when it is down,
// when admission found no room in its KV cache for the sequence (draft_allowed), or
// for one step after it rejected a batch with the sequence (skip_draft_once).
// Budgets: each side's prefill tokens per phase are capped at prefill_budget and its
// max_batch_tokens; Draft and Verify rows at the side's max_batch_tokens.
#ifndef TANDEM_COORDINATOR_STEP_PLANNER_H_
#define TANDEM_COORDINATOR_STEP_PLANNER_H_

#include <map>
#include <string>
#include <vector>

#include "coordinator/sequence.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::coordinator {

struct PlannerOptions {
  bool pipelining = true;         // Server default; requests may turn it off.
  bool optimistic = true;         // Optimistic continuation in lockstep mode.
  int optimistic_max_batch = 16;  // Running sequences up to which it is used.
  // Ping-pong when T(draft phase) / T(verify phase) reaches this (measured).
  double pingpong_min_ratio = 0.4;
  int max_k = 8;                   // Upper bound of K.
  int speculation_max_batch = 32;  // Above this many running: adaptive K -> 0.
  int prefill_chunk = 256;         // Prefill tokens per sequence and phase (target and draft).
  // Prefill tokens per phase in total, on each side (capped by its max_batch_tokens).
  int prefill_budget = 512;
  int target_max_batch_tokens = 1024;  // Rows per Verify (from Describe).
  int draft_max_batch_tokens = 1024;   // Rows per Draft forward (from Describe).
  int draft_max_k = 16;                // Draft worker's max proposals per call.
  int context_length = 2048;           // Target positions per sequence.
  int draft_context_length = 2048;     // Draft positions per sequence (from Describe).
  int proposal_top_k = 32;
};

struct WorkerAvailability {
  bool draft = false;
  bool target = false;
  // Measured T(draft phase) / T(verify phase) for the same sequences (0 = unknown).
  double draft_verify_ratio = 0;
};

struct PhasePlan {
  // Target side.
  v1::PrefillRequest target_prefill;
  v1::VerifyRequest verify;
  std::vector<Sequence*> verify_sequences;  // Parallel to verify.sequences().
  std::vector<int> verify_proposed;         // Proposals per verified sequence.
  // Draft side (normal drafts and continuations in one call).
  v1::PrefillRequest draft_prefill;
  v1::DraftRequest draft;
  std::vector<Sequence*> draft_sequences;  // Parallel to draft.sequences().
  std::vector<bool> draft_is_continuation;
  bool pipelined = false;  // Pipelining allowed for this phase.
  bool ping_pong = false;  // Ping-pong mode chosen.
  // Sequences stepped without their requested proposer, by reason ("draft_down",
  // "draft_rejected", "draft_kv", "draft_context", "batch_limit").
  std::map<std::string, int> fallbacks;

  bool empty() const {
    return target_prefill.sequences_size() == 0 && verify.sequences_size() == 0 &&
           draft_prefill.sequences_size() == 0 && draft.sequences_size() == 0;
  }
};

// Plans the next phase for `running` (unfinished sequences, admission order). Sets
// prompt-lookup proposals on the sequences it verifies with that method and counts
// fallback steps; otherwise only reads them.
PhasePlan PlanPhase(const std::vector<Sequence*>& running, const PlannerOptions& options,
                    const WorkerAvailability& workers);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_STEP_PLANNER_H_
