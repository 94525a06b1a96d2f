// The batch size a phase's speculation decisions are priced at (docs/architecture.md §3,
// "Planning batch"): the largest count of running sequences over the last `window`
// phases, this one included. Under steady load a request that finishes leaves the batch
// one short for a phase or two until the next is admitted (a closed-loop client's round
// trip); priced at that dip, speculation looks cheaper for one phase, the controller
// switches a draft on, and the draft is fed the whole context it missed (a catch-up
// that holds the phase) only to be switched off again when the batch refills. Decisions
// follow the sustained load instead: a rise counts at once, a fall after `window`
// phases at that level.
// Pure and deterministic; no I/O. Not thread-safe (the engine thread owns it).
#ifndef TANDEM_COORDINATOR_PLANNING_BATCH_H_
#define TANDEM_COORDINATOR_PLANNING_BATCH_H_

#include <deque>

namespace tandem::coordinator {

class PlanningBatch {
 public:
  // `window` >= 1 phases (smaller counts as 1; 1: the running count itself).
  explicit PlanningBatch(int window = 3);

  // Records a phase about to be planned over `running` sequences (< 0 counts as 0) and
  // returns the batch to price it at: the largest count of the last `window` phases.
  int Next(int running);

 private:
  int window_;
  std::deque<int> recent_;  // The last window_ counts, newest last.
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PLANNING_BATCH_H_
