// The draft model as a proposer: runs on the draft worker, proposes chains sampled by
// the draft with their sparse q. Its state mirrors the draft worker's cache for the
// sequence (which tokens it holds, position by position, including fed proposals) so
// each Draft call feeds only what the draft lacks, plus the speculation cache: while
// the target verifies, the next step is pre-drafted for the most likely verification
// outcomes (PlannerOptions::predraft_branches of them, ranked by outcome_ranking.h),
// each on a branch of the draft's cache (DraftSequence.fork_from); the outcome the
// verify returns, when pre-drafted, supplies the next candidates without a draft call
// and its branch becomes the sequence's cache on the draft worker (ids: the sequence's
// own and up to 31 branch ids, all released with it). A sequence verified plain while
// others verify (its pre-draft missed; PredraftsPlainSteps) gets the same for the plain
// step's one outcome: the draft guesses the target's token and drafts the chain after
// it on the sequence's own id, which are the next candidates when the guess is right.
//
// Usable unless the draft worker is down ("draft_down"), admission found no room in
// its KV cache ("draft_kv"), it rejected a batch with the sequence last step
// ("draft_rejected"), or the sequence has reached the draft's context
// ("draft_context"). K is capped by the draft's max_speculative_tokens and context.
// Long uncached stretches (new prompts) are prefilled in chunks of prefill_chunk
// within the phase's draft prefill budget before drafting.
#ifndef TANDEM_COORDINATOR_PROPOSERS_DRAFT_PROPOSER_H_
#define TANDEM_COORDINATOR_PROPOSERS_DRAFT_PROPOSER_H_

#include <cstdint>
#include <vector>

#include "coordinator/proposers/proposer.h"

namespace tandem::coordinator {

class DraftProposer final : public Proposer {
 public:
  v1::SpeculationMethod method() const override { return v1::SPECULATION_METHOD_DRAFT; }
  ProposerCapabilities capabilities() const override { return {ProposerSite::kDraftWorker}; }
  std::unique_ptr<ProposerState> NewState(const Sequence& s) const override;
  const char* Unusable(const Sequence& s, const ProposerState& state,
                       const WorkerAvailability& workers,
                       const PlannerOptions& options) const override;
  int MaxK(const Sequence& s, const PlannerOptions& options) const override;
  int CatchUpTokens(const Sequence& s, const ProposerState& state) const override;
  // True for a server-priced dynamic tree (--draft_tree_nodes, point-mass rules): the
  // controller weighs it against the chain each step. A tree the request sized is
  // always used (false here).
  bool OffersTreeChoice(const Sequence& s, const PlannerOptions& options) const override;
  void AddWork(Sequence* s, ProposerState& state, int slot, int k, bool tree,
               const PlannerOptions& options, DraftBudget* budget, PhasePlan* plan) const override;
  void AddContinuation(Sequence* s, ProposerState& state, int slot, int next_k,
                       const PlannerOptions& options, DraftBudget* budget,
                       PhasePlan* plan) const override;
  // A chain request (no request-sized tree) while its draft is at most
  // catch_up_min_tokens behind and may draft k + 1 tokens (the guess and k candidates).
  bool PredraftsPlainSteps(const Sequence& s, int k, const PlannerOptions& options) const override;
  void OnPrefilled(const Sequence& s, ProposerState& state,
                   const v1::PrefillSequence& fed) const override;
  std::optional<Candidates> OnDrafted(const Sequence& s, ProposerState& state,
                                      const v1::DraftSequence& request,
                                      const v1::DraftedSequence& response,
                                      bool continuation) const override;
  std::optional<Candidates> OnVerified(const Sequence& s, ProposerState& state,
                                       const Candidates& verified,
                                       const v1::VerifiedSequence& result,
                                       int committed) const override;
  void Reset(const Sequence& s, ProposerState& state) const override;
  void AppendWorkerIds(const Sequence& s, const ProposerState& state,
                       std::vector<uint64_t>* ids) const override;

  // What the draft worker holds for `s`, position by position (for tests).
  static const std::vector<int32_t>& CachedTokens(const ProposerState& state);
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_DRAFT_PROPOSER_H_
