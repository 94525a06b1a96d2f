#include "coordinator/proposers/candidates.h"

namespace tandem::coordinator {

v1::ProposedToken PointMassProposal(int32_t token) {
  v1::ProposedToken p;
  p.set_token(token);
  p.add_q_ids(token);
  p.add_q_probs(1.0f);
  return p;
}

}  // namespace tandem::coordinator
