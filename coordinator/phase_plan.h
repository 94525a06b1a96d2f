// What one engine phase runs (PhasePlan) and the inputs its planning reads (planner
// options, worker availability), shared by the planner, the proposers that add work to
// a phase, and the engine that runs it. Plain data.
#ifndef TANDEM_COORDINATOR_PHASE_PLAN_H_
#define TANDEM_COORDINATOR_PHASE_PLAN_H_

#include <map>
#include <string>
#include <vector>

#include "coordinator/pipeline_mode.h"
#include "spec/cost_model.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::coordinator {

class Sequence;

struct PlannerOptions {
  bool pipelining = true;         // Server default; requests may turn it off.
  bool optimistic = true;         // Pre-drafting (the speculation cache) in lockstep mode.
  int optimistic_max_batch = 16;  // Running sequences up to which it is used.
  // In lockstep with pre-drafting: a sequence whose next candidates were not pre-drafted
  // (a miss) is verified plain in a phase the target spends on the others anyway, while
  // its proposer drafts the step after it keyed on the target's token (a plain outcome,
  // DraftProposer), instead of sitting that phase out to be drafted afresh.
  bool predraft_plain_steps = true;
  // Verification outcomes pre-drafted per sequence, [1, 31]: 1 = only the all-accepted
  // one (the bonus token guessed); more also drafts after likely rejections.
  int predraft_branches = 1;
  // Draft-model token trees (greedy and coupled requests): up to this many of the
  // draft's next likeliest tokens may be verified as leaf siblings of each chain node,
  // within max_k nodes; a sibling is added only when its expected tokens pay for its
  // verify row (DraftProposer, docs/architecture.md §5); 0 = chains.
  int draft_tree_siblings = 0;
  // Dynamic draft trees (greedy and coupled requests; EAGLE-2's expansion on the draft
  // worker, nodes kept while their path probability pays for their verify row): the
  // server's node budget (a request's speculation.draft_tree_nodes overrides it; 0 =
  // none, the chain or static siblings above), and the expansion width per node.
  int draft_tree_nodes = 0;
  int draft_tree_width = 4;
  int max_tree_nodes = 16;         // Verify nodes per sequence (target's max_speculative_tokens).
  int max_k = 8;                   // Upper bound of K.
  int speculation_max_batch = 32;  // Above this many running: adaptive K -> 0 (batch_limit).
  // Phases whose peak running count is the batch speculation is priced at (PlanningBatch,
  // coordinator/planning_batch.h); 1: the running count of the phase itself.
  int planning_batch_window = 3;
  int prefill_chunk = 256;  // Prefill tokens per sequence and phase (target and draft).
  // Prefill tokens per phase in total, on each side (capped by its max_batch_tokens).
  int prefill_budget = 512;
  int target_max_batch_tokens = 1024;  // Rows per Verify (from Describe).
  int draft_max_batch_tokens = 1024;   // Rows per Draft forward (from Describe).
  int draft_max_k = 16;                // Draft worker's max proposals per call.
  int context_length = 2048;           // Target positions per sequence.
  int draft_context_length = 2048;     // Draft positions per sequence (from Describe).
  int proposal_top_k = 32;
  // A draft-worker proposer more than this many tokens (>= 0) behind a sequence is fed them
  // (draft prefill) while the sequence decodes plain, instead of stalling it.
  int catch_up_min_tokens = 16;
};

struct WorkerAvailability {
  bool draft = false;
  bool target = false;
  // The batch the cost terms below, the controller's probe budget and
  // speculation_max_batch are applied at: the recent peak of the running count
  // (coordinator/planning_batch.h), which a one-phase dip between requests does not
  // lower. <= 0: the phase's running count.
  int cost_batch = 0;
  // The mode pipelining runs in when a phase may pipeline (the engine's
  // PipelineModeSelector from the measured fits, or the server's forced mode).
  PipelineMode pipeline_mode = PipelineMode::kSequential;
  // Cost terms of a speculative step over the current batch, relative to a plain target
  // step of that batch (spec/speculation_controller.h): nu(K) for every proposer (empty
  // = 1), and c and o of the proposers that run on the draft worker. Proposers that run
  // on the coordinator or the target leader cost c = o = 0 (the latter's work is in nu).
  spec::VerifyCostFn verify_cost;
  double draft_worker_cost = 0;      // c per proposed token.
  double draft_worker_overhead = 0;  // o per speculative step.
  // Per token fed to the draft, priced for the whole batch (spec::BatchFeedCost); 0 = unknown.
  double draft_worker_feed_cost = 0;
  // A draft tree's c per unit of depth against draft_worker_cost (measured by the tree
  // calls' own fit; 1 before it has data): the tree option's draft cost is
  // draft_worker_cost times it, per unit of depth. Trees are never pre-drafted, so their
  // c is not discounted by the speculation cache's hit rate.
  double draft_worker_tree_factor = 1;
  double draft_worker_tree_overhead = 0;  // The tree option's o (not pre-drafted either).
  // sigma - 1, sigma the measured factor by which a verify is slower while the draft
  // worker works in the same phase (cores, caches and memory bandwidth shared; 0 where
  // nothing slows it): a phase with draft work costs every sequence of the batch that
  // much, so the sequences that use the draft worker in it share n (sigma - 1)
  // (step_choice.h). Used when draft and verify overlap (pipelined phases).
  double draft_overlap_cost = 0;
  // Measured factors (>= 1) by which a speculative step costs more than its modelled
  // c, nu and o at this batch size, for draft-worker proposers and for the others
  // (RealizedSpeedup, docs/architecture.md §3).
  double draft_worker_cost_factor = 1;
  double other_cost_factor = 1;
  double draft_worker_tree_cost_factor = 1;  // The draft's tree option.
  // Draft tokens the phase's pre-drafting (the speculation cache) may add and still be
  // predicted to finish within the phase's verify (from the measured fits); -1 = no
  // limit (fits not ready). The likeliest outcome of each sequence is always drafted.
  int predraft_token_budget = -1;
};

struct PhasePlan {
  // The batch the phase was priced at (WorkerAvailability::cost_batch, else the running
  // count): the calibration's bucket for the phase's outcome.
  int cost_batch = 0;
  // nu(K) of the phase's batch (WorkerAvailability::verify_cost; empty: unknown): what a
  // candidate node costs, which prices the nodes of trees (spec::NodeValueThreshold).
  spec::VerifyCostFn verify_cost;
  // Target side.
  v1::PrefillRequest target_prefill;
  v1::VerifyRequest verify;
  std::vector<Sequence*> verify_sequences;  // Parallel to verify.sequences().
  // Per verified sequence: its candidates' depth (a chain's size, a tree's longest path),
  // the proposals acceptance bookkeeping counts (stats, controller, metrics).
  std::vector<int> verify_proposed;
  // Per verified sequence: the proposer slot chosen for its step (-1: plain). A
  // target-leader proposer is asked for next candidates only when it is the choice,
  // so its work (Medusa heads, Lookahead's window) is never paid on plain steps.
  std::vector<int> verify_slots;
  // Draft side (normal drafts and continuations in one call). draft_tree_option: an
  // entry is a tree the controller chose over the chain (calibrated apart).
  bool draft_tree_option = false;
  v1::PrefillRequest draft_prefill;
  v1::DraftRequest draft;
  std::vector<Sequence*> draft_sequences;  // Parallel to draft.sequences().
  std::vector<bool> draft_is_continuation;
  // The proposer (slot in the sequence's chain) that built each draft entry and each
  // draft prefill entry; results are handed back to it.
  std::vector<int> draft_slots;                    // Parallel to draft.sequences().
  std::vector<Sequence*> draft_prefill_sequences;  // Parallel to draft_prefill.sequences().
  std::vector<int> draft_prefill_slots;
  bool pipelined = false;  // Pipelining allowed for this phase.
  bool ping_pong = false;  // Ping-pong mode chosen.
  // The mode this phase ran in: sequential when not pipelined, else the planner's use of
  // WorkerAvailability::pipeline_mode (ping-pong needs >= 2 running and the draft).
  PipelineMode mode = PipelineMode::kSequential;
  // Sequences stepped without their requested proposer, by reason ("draft_down",
  // "draft_rejected", "draft_kv", "draft_context", "batch_limit").
  std::map<std::string, int> fallbacks;

  bool empty() const {
    return target_prefill.sequences_size() == 0 && verify.sequences_size() == 0 &&
           draft_prefill.sequences_size() == 0 && draft.sequences_size() == 0;
  }
};

// Draft-side budgets of one phase, consumed as proposers add work.
struct DraftBudget {
  int rows = 0;          // Rows of the Draft call so far.
  int prefill_left = 0;  // Draft prefill tokens still allowed this phase.
  // Tokens pre-drafting may still add beyond each sequence's likeliest outcome (-1: no
  // limit; WorkerAvailability::predraft_token_budget).
  int predraft_tokens_left = -1;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PHASE_PLAN_H_
