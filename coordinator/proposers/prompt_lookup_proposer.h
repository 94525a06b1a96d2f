// Prompt lookup (n-gram matching over the sequence's own tokens, no model) as a
// proposer: runs on the coordinator, proposes point-mass candidates
// (coordinator/prompt_lookup.h has the matching rule). Its state is the sequence's
// n-gram index, kept in step with the committed tokens after every verify.
//
// With max_branches = 1 (the default) it proposes chains: the continuation of the
// matched n-gram's latest occurrence, K tokens. With max_branches > 1 it proposes the
// continuations of up to max_branches occurrences as one tree (PromptLookup::
// ProposeTree): depth K, at most min(K * max_branches, max_nodes) nodes, siblings in
// recency order. A tree that came out as a single path is sent as a chain (parents
// empty).
#ifndef TANDEM_COORDINATOR_PROPOSERS_PROMPT_LOOKUP_PROPOSER_H_
#define TANDEM_COORDINATOR_PROPOSERS_PROMPT_LOOKUP_PROPOSER_H_

#include "coordinator/prompt_lookup.h"
#include "coordinator/proposers/proposer.h"

namespace tandem::coordinator {

class PromptLookupProposer final : public Proposer {
 public:
  // `max_branches` in [1, PromptLookupOptions::kMaxBranches] (clamped).
  explicit PromptLookupProposer(int max_branches = 1);

  v1::SpeculationMethod method() const override { return v1::SPECULATION_METHOD_PROMPT_LOOKUP; }
  ProposerCapabilities capabilities() const override {
    ProposerCapabilities c;
    c.site = ProposerSite::kCoordinator;
    c.makes_trees = options_.max_branches > 1;
    return c;
  }
  std::unique_ptr<ProposerState> NewState(const Sequence& s) const override;
  const char* Unusable(const Sequence& s, const ProposerState& state,
                       const WorkerAvailability& workers,
                       const PlannerOptions& options) const override {
    return nullptr;
  }
  int MaxK(const Sequence& s, const PlannerOptions& options) const override {
    return options.max_k;
  }
  Candidates Propose(const Sequence& s, ProposerState& state, int k, int max_nodes) const override;
  std::optional<Candidates> OnVerified(const Sequence& s, ProposerState& state,
                                       const Candidates& verified,
                                       const v1::VerifiedSequence& result,
                                       int committed) const override;

 private:
  PromptLookupOptions options_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_PROMPT_LOOKUP_PROPOSER_H_
