// Prompt lookup (n-gram matching over the sequence's own tokens, no model) as a
// proposer: runs on the coordinator, proposes chains of point-mass candidates
// (coordinator/prompt_lookup.h has the matching rule). Its state is the sequence's
// n-gram index, kept in step with the committed tokens after every verify.
#ifndef TANDEM_COORDINATOR_PROPOSERS_PROMPT_LOOKUP_PROPOSER_H_
#define TANDEM_COORDINATOR_PROPOSERS_PROMPT_LOOKUP_PROPOSER_H_

#include "coordinator/proposers/proposer.h"

namespace tandem::coordinator {

class PromptLookupProposer final : public Proposer {
 public:
  v1::SpeculationMethod method() const override { return v1::SPECULATION_METHOD_PROMPT_LOOKUP; }
  ProposerCapabilities capabilities() const override { return {ProposerSite::kCoordinator}; }
  std::unique_ptr<ProposerState> NewState(const Sequence& s) const override;
  const char* Unusable(const Sequence& s, const ProposerState& state,
                       const WorkerAvailability& workers,
                       const PlannerOptions& options) const override {
    return nullptr;
  }
  int MaxK(const Sequence& s, const PlannerOptions& options) const override {
    return options.max_k;
  }
  Candidates Propose(const Sequence& s, ProposerState& state, int k) const override;
  std::optional<Candidates> OnVerified(const Sequence& s, ProposerState& state,
                                       const Candidates& verified,
                                       const v1::VerifiedSequence& result,
                                       int committed) const override;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_PROMPT_LOOKUP_PROPOSER_H_
