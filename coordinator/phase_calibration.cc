#include "coordinator/phase_calibration.h"

#include "coordinator/sequence.h"

namespace tandem::coordinator {

PhaseCalibration CalibrationOf(const PhasePlan& plan) {
  PhaseCalibration c;
  if (plan.target_prefill.sequences_size() > 0 || plan.draft_prefill.sequences_size() > 0) {
    return c;
  }
  c.observed = true;
  bool draft = plan.draft.sequences_size() > 0, tree = plan.draft_tree_option, other = false;
  for (size_t i = 0; i < plan.verify_sequences.size(); ++i) {
    const Sequence* s = plan.verify_sequences[i];
    if (!s->candidates.empty() && s->candidates.site == ProposerSite::kDraftWorker) {
      draft = true;
      tree = tree || s->candidates.tree_option;
    } else if (i < plan.verify_proposed.size() && plan.verify_proposed[i] > 0) {
      other = true;
    }
  }
  if (tree) {
    c.kind = SpeculationKind::kDraftTree;
  } else if (draft) {
    c.kind = SpeculationKind::kDraftWorker;
  } else if (other) {
    c.kind = SpeculationKind::kOther;
  }
  return c;
}

}  // namespace tandem::coordinator
