// DraftProposer's speculation cache (docs/architecture.md §3, "Speculation cache"):
// while the target verifies, the next step is pre-drafted for likely outcomes; the
// outcome the verify returns, when pre-drafted, supplies the next candidates.
#include <algorithm>

#include "coordinator/proposers/draft_proposer.h"
#include "coordinator/proposers/draft_proposer_internal.h"
#include "coordinator/proposers/outcome_ranking.h"

namespace tandem::coordinator {
namespace {

using draft_internal::AddDraftEntry;
using draft_internal::AttachSiblings;
using draft_internal::Branch;
using draft_internal::DraftState;
using draft_internal::Of;
using draft_internal::TakesDeterministicSiblings;
using draft_internal::WorkerId;

// The chain part of `c` (its first nodes while each follows the one before; leaf
// siblings come after it) and the leaf siblings beside each chain node.
int ChainLength(const Candidates& c, std::vector<std::vector<int32_t>>* siblings) {
  int chain = c.size();
  if (!c.parents.empty()) {
    chain = 0;
    while (chain < c.size() && c.parents[chain] == chain - 1) ++chain;
  }
  siblings->assign(chain, {});
  for (int i = chain; i < c.size(); ++i) {
    const int beside = c.parents[i] + 1;  // The chain node this leaf stands beside.
    if (beside >= 0 && beside < chain) (*siblings)[beside].push_back(c.tokens[i].token());
  }
  return chain;
}

}  // namespace

// While the candidates are verified, pre-drafts the next step for the most likely
// outcomes (outcome_ranking.h, over the chain d_1..d_K), each on a branch forked from
// the main id: a rejection (j < K, t) forks at length + j (tokens + d_1..d_j), feeds t
// and drafts the next step's candidates; a path outcome (all of the chain, or d_1..d_j
// and a leaf sibling t of a tree) forks after its path but its last token, feeds that
// token and drafts the bonus guess and the candidates after it. Each is capped by the
// tokens still to generate and by both contexts.
void DraftProposer::AddContinuation(Sequence* s, ProposerState& state, int slot, int next_k,
                                    const PlannerOptions& o, DraftBudget* budget,
                                    PhasePlan* plan) const {
  DraftState& d = Of(state);
  d.branches.clear();
  if (d.tree_nodes > 0) return;  // Dynamic trees are not pre-drafted.
  std::vector<std::vector<int32_t>> siblings;
  const int k = ChainLength(s->candidates, &siblings);
  const int length = static_cast<int>(s->tokens().size());
  const size_t expected = length + k - 1;  // The cache holds tokens + candidates[0, K-1).
  if (k == 0 || d.cache.size() != expected || d.ValidLength(s->tokens()) != length) return;
  d.node_value_threshold = spec::NodeValueThreshold(s->PlannedRate(), plan->verify_cost, next_k);
  const std::vector<v1::ProposedToken> chain(s->candidates.tokens.begin(),
                                             s->candidates.tokens.begin() + k);
  const int context = std::min(o.context_length, o.draft_context_length);
  int next_free = 0;  // Slots in order, skipping the main one.
  for (const StepOutcome& outcome : RankOutcomes(chain, d.top, std::max(1, o.predraft_branches))) {
    if (budget->rows + 1 > o.draft_max_batch_tokens) break;
    const int j = outcome.accepted;
    Branch b;
    if (outcome.token < 0) {  // The whole chain.
      b.accepted = k;
      b.fed = chain.back().token();
    } else if (std::count(siblings[j].begin(), siblings[j].end(), outcome.token) > 0) {
      b.accepted = j + 1;  // d_1..d_j and the leaf t.
      b.fed = outcome.token;
    } else {
      b.accepted = j;
      b.token = outcome.token;
    }
    const bool path = b.token < 0;
    // The tokens before the fed one (a rejection feeds t after d_1..d_j).
    const int start = length + (path ? b.accepted - 1 : j);
    // A rejection commits j + 1 tokens and leaves remaining - j - 1 for the next step
    // (its proposals and its own committed token); a path of L commits L + 1, and its
    // branch drafts the bonus guess too.
    const int more = std::min({next_k + (path ? 1 : 0), o.draft_max_k, context - start - 1,
                               path ? s->remaining() - b.accepted - 1 : s->remaining() - j - 2});
    if (more < (path ? 2 : 1)) continue;  // Nothing to propose after the outcome.
    // Beyond the likeliest outcome, only what the draft can do while the target verifies.
    if (!d.branches.empty() && budget->predraft_tokens_left >= 0) {
      if (budget->predraft_tokens_left < more) break;
      budget->predraft_tokens_left -= more;
    }
    if (next_free == d.main_slot) ++next_free;
    b.slot = next_free++;
    b.cache.assign(d.cache.begin(), d.cache.begin() + start);
    d.branches.push_back(std::move(b));
    d.used_slots |= 1u << d.branches.back().slot;
    budget->rows += 1;
    const int32_t fed = path ? d.branches.back().fed : outcome.token;
    v1::DraftSequence* entry =
        AddDraftEntry(s, WorkerId(s->id(), d.branches.back().slot), slot,
                      static_cast<uint32_t>(start), &fed, &fed + 1, more, true, o, plan);
    entry->set_fork_from(WorkerId(s->id(), d.main_slot));
  }
}

// A hit: the branch of the verify's outcome was drafted; it becomes the main id (its
// cache is the sequence's tokens plus its proposals) and its proposals are the next
// step's candidates. Every other branch is dropped (its slot is reused later).
std::optional<Candidates> DraftProposer::OnVerified(const Sequence& s, ProposerState& state,
                                                    const Candidates& verified,
                                                    const v1::VerifiedSequence& result,
                                                    int committed) const {
  DraftState& d = Of(state);
  std::vector<Branch> branches = std::move(d.branches);
  d.branches.clear();
  d.top.clear();
  const int proposed = verified.size();
  const int j = static_cast<int>(result.num_accepted());
  if (proposed == 0 || verified.method != method() || committed != j + 1 ||
      result.committed_size() != j + 1) {
    return std::nullopt;
  }
  const int32_t t = result.committed(j);
  for (Branch& b : branches) {
    const bool path = b.token < 0;
    if (b.proposals.empty() || b.accepted != j) continue;
    if (path ? j == 0 || result.committed(j - 1) != b.fed || b.proposals[0].token() != t
             : b.token != t) {
      continue;
    }
    const size_t skip = path ? 1 : 0;  // The bonus guess is committed, not a candidate.
    d.cache = std::move(b.cache);
    d.main_slot = b.slot;
    if (b.top.size() > skip) d.top.assign(b.top.begin() + skip, b.top.end());
    Candidates next;
    next.method = method();
    next.site = ProposerSite::kDraftWorker;
    next.predrafted = true;
    next.tokens.assign(b.proposals.begin() + skip, b.proposals.end());
    if (d.tree_siblings > 0 && TakesDeterministicSiblings(s)) {
      AttachSiblings(d.top, d.tree_siblings, d.max_nodes, d.node_value_threshold, &next);
    }
    return next;
  }
  return std::nullopt;
}

}  // namespace tandem::coordinator
