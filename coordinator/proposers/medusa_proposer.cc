#include "coordinator/proposers/medusa_proposer.h"

#include <algorithm>

#include "coordinator/sequence.h"

namespace tandem::coordinator {

int MedusaProposer::MaxK(const Sequence& s, const PlannerOptions& options) const {
  const std::optional<int>& fixed = s.request().speculation.fixed_k;
  return std::max(0, std::min(options.max_k, fixed.value_or(default_nodes_)));
}

std::optional<Candidates> MedusaProposer::OnVerified(const Sequence& s, ProposerState& state,
                                                     const Candidates& verified,
                                                     const v1::VerifiedSequence& result,
                                                     int committed) const {
  if (!result.has_next_candidates() || result.next_candidates().method() != method() ||
      result.next_candidates().proposals_size() == 0) {
    return std::nullopt;
  }
  const v1::NextCandidates& next = result.next_candidates();
  Candidates c;
  c.method = method();
  c.site = ProposerSite::kTargetLeader;
  c.tokens.assign(next.proposals().begin(), next.proposals().end());
  c.parents.assign(next.parents().begin(), next.parents().end());
  return c;
}

}  // namespace tandem::coordinator
