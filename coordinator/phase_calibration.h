// Which phases calibrate speculation on outcomes (coordinator/realized_speedup.h) and
// as which kind (docs/architecture.md §3, "Calibration"). Pure; no I/O.
#ifndef TANDEM_COORDINATOR_PHASE_CALIBRATION_H_
#define TANDEM_COORDINATOR_PHASE_CALIBRATION_H_

#include <optional>

#include "coordinator/phase_plan.h"
#include "coordinator/realized_speedup.h"

namespace tandem::coordinator {

// How one phase's committed tokens and time enter RealizedSpeedup::Observe.
struct PhaseCalibration {
  // False: the phase is left out. A target prefill (a prompt's first token) and a
  // catch-up feed of the draft (its switch cost, priced apart by spec::BatchFeedCost)
  // each commit a token in more time than a plain step; counted as speculation they
  // would charge it a cost it does not have (a feed counted as the draft's chain made
  // chains look twice as expensive as they are next to trees).
  bool observed = false;
  // Empty: a plain phase. kDraftTree when the draft drafts or its candidates verified
  // are the tree option, kDraftWorker for any other draft work or draft candidates,
  // kOther when only proposals of the coordinator or the target leader are verified.
  std::optional<SpeculationKind> kind;
};

// The calibration of `plan`, decided before it runs (from its requests, the verified
// sequences' candidates and plan.verify_proposed).
PhaseCalibration CalibrationOf(const PhasePlan& plan);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PHASE_CALIBRATION_H_
