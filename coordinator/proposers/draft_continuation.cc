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

// A plain step's one outcome: the target commits one token t after the sequence's
// tokens. Feeds the main id what the draft lacks and drafts the guess of t and the
// next_k candidates after it there (no fork: the main id holds nothing else worth
// keeping); OnVerified finds them when t is the guess. Capped like a path outcome of
// no accepted candidates; adds nothing when the draft is more than
// catch_up_min_tokens behind or the phase's draft rows are spent.
void AddPlainContinuation(Sequence* s, DraftState& d, int slot, int next_k, const PlannerOptions& o,
                          DraftBudget* budget, PhasePlan* plan) {
  const std::vector<int32_t>& tokens = s->tokens();
  const int length = static_cast<int>(tokens.size());
  const int start = std::min(d.ValidLength(tokens), length - 1);
  const int fed = length - start;
  const int context = std::min(o.context_length, o.draft_context_length);
  const int more = std::min({next_k + 1, o.draft_max_k, context - length, s->remaining() - 1});
  if (more < 2 || fed - 1 > o.catch_up_min_tokens ||
      budget->rows + fed > o.draft_max_batch_tokens) {
    return;
  }
  budget->rows += fed;
  d.tree_nodes = 0;
  d.tree_option = false;
  d.tree_depth = next_k;
  d.tree_siblings = o.draft_tree_siblings;
  d.max_nodes = o.max_k;
  d.node_value_threshold = spec::NodeValueThreshold(s->PlannedRate(), plan->verify_cost, next_k);
  Branch b;
  b.plain = true;
  b.slot = d.main_slot;
  b.cache.assign(d.cache.begin(), d.cache.begin() + start);
  d.branches.push_back(std::move(b));
  AddDraftEntry(s, WorkerId(s->id(), d.main_slot), slot, static_cast<uint32_t>(start),
                tokens.data() + start, tokens.data() + length, more, true, o, plan);
}

// The hit on `b` (its first `skip` proposals were the committed guess): the branch
// becomes the main id and its other proposals the next candidates.
Candidates TakeBranch(const Sequence& s, DraftState& d, Branch& b, size_t skip) {
  d.cache = std::move(b.cache);
  d.main_slot = b.slot;
  if (b.top.size() > skip) d.top.assign(b.top.begin() + skip, b.top.end());
  Candidates next;
  next.method = v1::SPECULATION_METHOD_DRAFT;
  next.site = ProposerSite::kDraftWorker;
  next.predrafted = true;
  next.tokens.assign(b.proposals.begin() + skip, b.proposals.end());
  if (d.tree_siblings > 0 && TakesDeterministicSiblings(s)) {
    AttachSiblings(d.top, d.tree_siblings, d.max_nodes, d.node_value_threshold, &next);
  }
  return next;
}

}  // namespace

bool DraftProposer::PredraftsPlainSteps(const Sequence& s, int k, const PlannerOptions& o) const {
  const int length = static_cast<int>(s.tokens().size());
  const int room =
      std::min({o.draft_max_k, std::min(o.context_length, o.draft_context_length) - length,
                s.remaining() - 1});
  return k >= 1 && room >= 2 && !s.request().speculation.draft_tree_nodes.has_value();
}

// While the candidates are verified, pre-drafts the next step for the most likely
// outcomes (outcome_ranking.h, over the chain d_1..d_K), each on a branch forked from
// the main id: a rejection (j < K, t) forks at length + j (tokens + d_1..d_j), feeds t
// and drafts the next step's candidates; a path outcome (all of the chain, or d_1..d_j
// and a leaf sibling t of a tree) forks after its path but its last token, feeds that
// token and drafts the bonus guess and the candidates after it. Each is capped by the
// tokens still to generate and by both contexts. Without candidates (a plain step):
// AddPlainContinuation.
void DraftProposer::AddContinuation(Sequence* s, ProposerState& state, int slot, int next_k,
                                    const PlannerOptions& o, DraftBudget* budget,
                                    PhasePlan* plan) const {
  DraftState& d = Of(state);
  d.branches.clear();
  if (s->candidates.empty()) {
    if (next_k > 0) AddPlainContinuation(s, d, slot, next_k, o, budget, plan);
    return;
  }
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
// step's candidates. Every other branch is dropped (its slot is reused later). A plain
// step hits when the token it committed is its branch's guess.
std::optional<Candidates> DraftProposer::OnVerified(const Sequence& s, ProposerState& state,
                                                    const Candidates& verified,
                                                    const v1::VerifiedSequence& result,
                                                    int committed) const {
  DraftState& d = Of(state);
  std::vector<Branch> branches = std::move(d.branches);
  d.branches.clear();
  d.top.clear();
  const int proposed = verified.size();
  if (proposed == 0) {
    for (Branch& b : branches) {
      if (b.plain && b.proposals.size() >= 2 && committed == 1 && result.committed_size() == 1 &&
          b.proposals[0].token() == result.committed(0)) {
        return TakeBranch(s, d, b, 1);
      }
    }
    return std::nullopt;
  }
  const int j = static_cast<int>(result.num_accepted());
  if (verified.method != method() || committed != j + 1 || result.committed_size() != j + 1) {
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
    return TakeBranch(s, d, b, path ? 1 : 0);  // A path's bonus guess is committed.
  }
  return std::nullopt;
}

}  // namespace tandem::coordinator
