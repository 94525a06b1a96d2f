// The proposer seam: one speculation method is one Proposer (its coordinator half; a
// method that runs on a worker also has a worker half there). The planner and the
// engine see only candidates (coordinator/proposers/candidates.h) and capabilities;
// they never test a method name.
//
// A sequence carries, in preference order, the proposers its request may use (its
// chain, from ProposerRegistry: AUTO = every served proposer in order; a named method =
// that one; NONE = empty) and one ProposerState per chain entry. Each step the planner
// offers the entries that are Usable() for the sequence, with K capped by MaxK(), to
// the sequence's speculation controller, which picks one and K (or none; a fixed-K
// request takes the first usable one); an unusable preferred entry counts as a
// fallback step with its reason.
//
// Lifecycle of one step, by site:
//  * kCoordinator: the planner calls Propose() when it verifies the sequence.
//  * kDraftWorker: the planner calls AddWork() (a prefill chunk or a Draft entry), the
//    engine hands the answer to OnPrefilled() / OnDrafted(), which returns the
//    candidates; while they are verified the planner may call AddContinuation()
//    (pre-drafts of the next step for likely outcomes), whose answers also reach
//    OnDrafted().
//  * kTargetLeader: when the planner chooses it, FitCandidates() sizes the candidates
//    it returned with the last verify to the phase's verify cost.
//  * every site: after each verify, OnVerified() sees the committed tokens (to keep its
//    state in step) and may return the next step's candidates (a continuation hit, or
//    candidates a target-leader proposer returned with the result). Reset() forgets
//    what the proposer's worker holds for the sequence (the worker restarted, or a
//    call failed).
// Proposers are shared by all sequences and called from the engine thread only;
// per-sequence data lives in their ProposerState.
#ifndef TANDEM_COORDINATOR_PROPOSERS_PROPOSER_H_
#define TANDEM_COORDINATOR_PROPOSERS_PROPOSER_H_

#include <memory>
#include <optional>
#include <vector>

#include "coordinator/phase_plan.h"
#include "coordinator/proposers/candidates.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::coordinator {

class Sequence;

struct ProposerCapabilities {
  ProposerSite site = ProposerSite::kCoordinator;
  bool makes_trees = false;         // Candidates may be trees (parents set).
  bool explicit_positions = false;  // Candidates may set positions.
  bool needs_hidden_state = false;  // Needs the target's hidden states (target leader).
};

// Per-sequence state of one proposer; each proposer defines its own subclass.
class ProposerState {
 public:
  virtual ~ProposerState() = default;
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  virtual v1::SpeculationMethod method() const = 0;
  virtual ProposerCapabilities capabilities() const = 0;
  // Fresh state for a sequence (its prompt is s.tokens()).
  virtual std::unique_ptr<ProposerState> NewState(const Sequence& s) const = 0;

  // nullptr when the proposer can propose for `s` this step; else why not, a
  // fallback reason for metrics ("draft_down", "draft_kv", ...).
  virtual const char* Unusable(const Sequence& s, const ProposerState& state,
                               const WorkerAvailability& workers,
                               const PlannerOptions& options) const = 0;
  // Most candidates it can propose for `s` now (its worker's limits), >= 0.
  virtual int MaxK(const Sequence& s, const PlannerOptions& options) const = 0;
  // Committed tokens of `s` its worker must be fed before it can propose (beyond the
  // last one, which every draft call feeds), >= 0: 0 when it is in step. Above
  // PlannerOptions::catch_up_min_tokens the planner feeds them (AddWork's prefill)
  // while the sequence decodes plain, and the controller charges them as a switch cost.
  virtual int CatchUpTokens(const Sequence& s, const ProposerState& state) const { return 0; }

  // kCoordinator: candidates for `s` now of depth at most `k` (the K the controller
  // chose: a chain of up to k, or, with makes_trees, a tree whose root paths are at most
  // k long) and at most `max_nodes` >= k nodes (the verify rows, KV positions and
  // worker limit the planner allows for them). May be empty: nothing to propose.
  virtual Candidates Propose(const Sequence& s, ProposerState& state, int k, int max_nodes) const {
    return {};
  }

  // Whether `s` may get either a chain or a tree from it this step, as the controller
  // chooses (the tree is then a controller option of its own, with its own acceptance
  // and costs: docs/architecture.md §3, "Chain or tree"). False: one shape, whatever
  // the proposer makes (a Medusa tree, a tree whose size the request set, a chain).
  virtual bool OffersTreeChoice(const Sequence& s, const PlannerOptions& options) const {
    return false;
  }

  // kDraftWorker: adds the work that yields `k` candidates for `s` (or, when more than
  // catch_up_min_tokens are to be fed, a prefill chunk towards it) to `plan` within
  // `budget`, recording `slot` with it; `tree`: the controller chose the tree option
  // (OffersTreeChoice). May add nothing (budget spent: the sequence waits for the next
  // phase).
  virtual void AddWork(Sequence* s, ProposerState& state, int slot, int k, bool tree,
                       const PlannerOptions& options, DraftBudget* budget, PhasePlan* plan) const {}
  // kDraftWorker: while `s`'s candidates (from this proposer) are verified, pre-drafts
  // the step after them for likely verification outcomes, with up to `next_k`
  // candidates each (the K wanted for that step; 0: none); may add nothing. When `s`
  // has no candidates (it is verified plain) and PredraftsPlainSteps(), pre-drafts the
  // step after the plain one instead.
  virtual void AddContinuation(Sequence* s, ProposerState& state, int slot, int next_k,
                               const PlannerOptions& options, DraftBudget* budget,
                               PhasePlan* plan) const {}
  // kDraftWorker: whether AddContinuation() can pre-draft for `s` while it is verified
  // plain (a chain of `k` candidates for the step after, keyed on the token the plain
  // step commits).
  virtual bool PredraftsPlainSteps(const Sequence& s, int k, const PlannerOptions& options) const {
    return false;
  }
  virtual void OnPrefilled(const Sequence& s, ProposerState& state,
                           const v1::PrefillSequence& fed) const {}
  // The answer to an entry this proposer added; returns the candidates (not for a
  // continuation, which is kept until OnVerified).
  virtual std::optional<Candidates> OnDrafted(const Sequence& s, ProposerState& state,
                                              const v1::DraftSequence& request,
                                              const v1::DraftedSequence& response,
                                              bool continuation) const {
    return std::nullopt;
  }

  // After a verify of `verified` (empty: a plain step) committed `committed` tokens
  // (already appended to s.tokens()). Returns the next step's candidates when it has
  // them already.
  virtual std::optional<Candidates> OnVerified(const Sequence& s, ProposerState& state,
                                               const Candidates& verified,
                                               const v1::VerifiedSequence& result,
                                               int committed) const {
    return std::nullopt;
  }
  // kTargetLeader, when the planner chose it for `s` this phase: fits s->candidates (the
  // ones it returned with the last verify, or none) to the phase's verify cost
  // `verify_cost` (nu at the batch size; empty: unknown) before they are verified. May
  // rebuild or empty them (an empty step is plain). Default: as they are.
  virtual void FitCandidates(Sequence* s, ProposerState& state,
                             const spec::VerifyCostFn& verify_cost) const {}
  // Its worker's cache for `s` is unknown or gone: forget what it assumed about it.
  virtual void Reset(const Sequence& s, ProposerState& state) const {}
  // Appends the worker-side sequence ids other than s.id() it may have created for `s`
  // (branches) on its worker, to be released with the sequence.
  virtual void AppendWorkerIds(const Sequence& s, const ProposerState& state,
                               std::vector<uint64_t>* ids) const {}
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_PROPOSER_H_
