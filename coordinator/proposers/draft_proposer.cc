#include "coordinator/proposers/draft_proposer.h"

#include <algorithm>

#include "coordinator/proposers/draft_tree_pruning.h"
#include "coordinator/proposers/outcome_ranking.h"
#include "coordinator/sequence.h"

namespace tandem::coordinator {
namespace {

// Top tokens asked per proposal when branches beyond the all-accepted one are wanted,
// and the most a draft reports (kernels/accept/draft_sample.h, kMaxDraftTop).
constexpr int kOutcomeTopTokens = 4;
constexpr int kMaxTop = 16;

// Whether `s`'s rule accepts deterministic sibling nodes: greedy and the coupled rule
// follow the child equal to the target's token; rejection sampling needs siblings
// drawn from q (docs/architecture.md §4, Trees).
bool TakesDeterministicSiblings(const Sequence& s) {
  const v1::SequenceSampling sampling = ToSequenceSampling(s.request());
  return sampling.temperature() == 0 || sampling.rule() == v1::ACCEPTANCE_RULE_COUPLED;
}

// The dynamic tree budget of `s` (0 = no dynamic tree): the request's
// speculation.draft_tree_nodes or the server's, within what a verify and a draft call
// take and the target's context holds (the nodes take verify positions after the
// tokens); point-mass rules only.
int DynamicTreeNodes(const Sequence& s, const PlannerOptions& o) {
  if (!TakesDeterministicSiblings(s)) return 0;
  const int nodes = s.request().speculation.draft_tree_nodes.value_or(o.draft_tree_nodes);
  const int room = o.context_length - static_cast<int>(s.tokens().size());
  return std::max(0, std::min({nodes, o.max_tree_nodes, o.draft_max_k, room}));
}

// Turns the chain in `c` into a tree: the draft's next likeliest tokens beside chain
// nodes as leaves, most valuable first, at most `siblings` beside each node and
// `max_nodes` nodes in all. A leaf t beside d_{j+1} adds one token (the bonus after t)
// exactly when the target accepts d_1..d_j and then emits t, which the draft puts at
// P(j, t) (outcome_ranking.h); it is added only while P(j, t) > `min_value`.
void AttachSiblings(const std::vector<v1::TopTokens>& top, int siblings, int max_nodes,
                    double min_value, Candidates* c) {
  const int chain = c->size();
  std::vector<int32_t> parents(chain);
  for (int i = 0; i < chain; ++i) parents[i] = i - 1;
  std::vector<int> beside(chain, 0);
  for (const StepOutcome& o : RankOutcomes(c->tokens, top, chain * kMaxTop + 1)) {
    if (static_cast<int>(parents.size()) >= max_nodes || !(o.probability > min_value)) break;
    if (o.token < 0 || beside[o.accepted] >= siblings) continue;
    ++beside[o.accepted];
    c->tokens.push_back(PointMassProposal(o.token));
    parents.push_back(o.accepted - 1);
  }
  if (static_cast<int>(parents.size()) > chain) c->parents = std::move(parents);
}

// The draft worker's id of slot `slot` of sequence `id`'s id pool: slot 0 is the
// sequence's own id, the others carry the slot in bits 48.. (engine ids stay below 2^48).
uint64_t WorkerId(uint64_t id, int slot) { return slot == 0 ? id : id | (uint64_t(slot) << 48); }

// A continuation pre-drafted for one verification outcome on a branch of the draft's
// cache (the speculation cache's entry).
// Two kinds: a rejection outcome (j, t) (the target accepts j candidates, then emits
// t), and a path outcome: the target accepts a whole root path of `accepted` candidates
// ending in `fed` (the chain, or a leaf sibling t beside d_{j+1}: the path d_1..d_j t)
// and emits a bonus token, which the branch guesses as proposals[0].
struct Branch {
  int slot = 0;                              // Its worker id's slot.
  int accepted = 0;                          // Candidates the outcome accepts.
  int32_t token = -1;                        // A rejection's t; -1 for a path outcome.
  int32_t fed = -1;                          // A path outcome's last accepted candidate.
  std::vector<int32_t> cache;                // What the worker holds for it once drafted.
  std::vector<v1::ProposedToken> proposals;  // Empty until drafted.
  std::vector<v1::TopTokens> top;            // Parallel to proposals (when asked).
};

struct DraftState : ProposerState {
  // What the draft worker has cached for the sequence's main id, position by position
  // (may run past the committed tokens after drafting). Cleared when its state is
  // unknown.
  std::vector<int32_t> cache;
  int main_slot = 0;        // The slot of the worker id that holds `cache`.
  uint32_t used_slots = 1;  // Slots whose ids were ever created on the worker (bit mask).
  // The draft's top tokens at each current candidate's position (empty: not asked).
  std::vector<v1::TopTokens> top;
  // Outcomes pre-drafted while the current candidates are verified.
  std::vector<Branch> branches;
  // Tree shape of the next candidates (PlannerOptions and spec::NodeValueThreshold, as
  // of the last AddWork or AddContinuation).
  int tree_siblings = 0;
  int max_nodes = 0;
  double node_value_threshold = 0;
  // A dynamic tree's node budget (0 = none; then no pre-drafting) and the K it was
  // asked for (the nodes kept whatever their value).
  int tree_nodes = 0;
  int tree_depth = 0;
  bool tree_option = false;  // That tree is the controller's tree option.

  // Length of the common prefix of cache and the sequence's tokens.
  int ValidLength(const std::vector<int32_t>& tokens) const {
    const size_t n = std::min(cache.size(), tokens.size());
    size_t i = 0;
    while (i < n && cache[i] == tokens[i]) ++i;
    return static_cast<int>(i);
  }
  // Records what a call fed and proposed (the last proposal is not fed):
  // cache = cache[0, start) + fed + proposals[0, K-1).
  template <typename Tokens>
  void Fed(uint32_t start, const Tokens& fed, const v1::DraftedSequence* drafted) {
    cache.resize(std::min<size_t>(cache.size(), start));
    cache.insert(cache.end(), fed.begin(), fed.end());
    if (drafted == nullptr) return;
    for (int i = 0; i + 1 < drafted->proposals_size(); ++i) {
      cache.push_back(drafted->proposals(i).token());
    }
  }
};

DraftState& Of(ProposerState& state) { return static_cast<DraftState&>(state); }

v1::DraftSequence* AddDraftEntry(Sequence* s, uint64_t worker_id, int slot, uint32_t start,
                                 const int32_t* begin, const int32_t* end, int k, bool continuation,
                                 const PlannerOptions& o, PhasePlan* plan) {
  v1::DraftSequence* d = plan->draft.add_sequences();
  d->set_sequence_id(worker_id);
  d->set_start_position(start);
  d->mutable_tokens()->Add(begin, end);
  d->set_num_draft_tokens(k);
  *d->mutable_sampling() = ToSequenceSampling(s->request());
  d->set_proposal_top_k(o.proposal_top_k);
  if (o.predraft_branches > 1 || o.draft_tree_siblings > 0) {
    d->set_num_top(std::max(kOutcomeTopTokens, std::min(o.draft_tree_siblings + 1, kMaxTop)));
  }
  plan->draft_sequences.push_back(s);
  plan->draft_is_continuation.push_back(continuation);
  plan->draft_slots.push_back(slot);
  return d;
}

}  // namespace

std::unique_ptr<ProposerState> DraftProposer::NewState(const Sequence& s) const {
  return std::make_unique<DraftState>();
}

const std::vector<int32_t>& DraftProposer::CachedTokens(const ProposerState& state) {
  return static_cast<const DraftState&>(state).cache;
}

const char* DraftProposer::Unusable(const Sequence& s, const ProposerState& state,
                                    const WorkerAvailability& workers,
                                    const PlannerOptions& options) const {
  if (!workers.draft) return "draft_down";
  if (!s.draft_allowed) return "draft_kv";
  if (s.skip_draft_once) return "draft_rejected";
  if (MaxK(s, options) <= 0) return "draft_context";
  return nullptr;
}

int DraftProposer::CatchUpTokens(const Sequence& s, const ProposerState& state) const {
  const int length = static_cast<int>(s.tokens().size());
  const int start =
      std::min(static_cast<const DraftState&>(state).ValidLength(s.tokens()), length - 1);
  return std::max(0, length - 1 - start);
}

int DraftProposer::MaxK(const Sequence& s, const PlannerOptions& o) const {
  return std::min(o.draft_max_k, o.draft_context_length - static_cast<int>(s.tokens().size()));
}

bool DraftProposer::OffersTreeChoice(const Sequence& s, const PlannerOptions& o) const {
  return DynamicTreeNodes(s, o) > 0 && !s.request().speculation.draft_tree_nodes.has_value();
}

void DraftProposer::AddWork(Sequence* s, ProposerState& state, int slot, int k, bool tree,
                            const PlannerOptions& o, DraftBudget* budget, PhasePlan* plan) const {
  const std::vector<int32_t>& tokens = s->tokens();
  const int length = static_cast<int>(tokens.size());
  const int start = std::min(Of(state).ValidLength(tokens), length - 1);
  const int fed = length - start;
  if (fed - 1 > o.catch_up_min_tokens || fed > o.draft_max_batch_tokens / 2) {
    // A long uncached stretch (a new prompt, or tokens committed while the draft was
    // off): prefill the draft in chunks first, within the phase's draft prefill budget
    // (later sequences wait for the next phase).
    const int chunk = std::min({o.prefill_chunk, fed - 1, budget->prefill_left});
    if (chunk <= 0) return;
    budget->prefill_left -= chunk;
    v1::PrefillSequence* p = plan->draft_prefill.add_sequences();
    p->set_sequence_id(WorkerId(s->id(), Of(state).main_slot));
    p->set_start_position(start);
    p->mutable_tokens()->Add(tokens.begin() + start, tokens.begin() + start + chunk);
    plan->draft_prefill_sequences.push_back(s);
    plan->draft_prefill_slots.push_back(slot);
    return;
  }
  DraftState& d = Of(state);
  // A server-priced tree only when the controller chose it; a request-sized one always.
  const bool sized_by_request = s->request().speculation.draft_tree_nodes.has_value();
  d.tree_nodes = tree || sized_by_request ? DynamicTreeNodes(*s, o) : 0;
  d.tree_option = tree && d.tree_nodes > 0 && !sized_by_request;
  d.tree_depth = k;
  // A tree's passes feed up to tree_width frontier nodes.
  const int rows = std::max(fed, d.tree_nodes > 0 ? o.draft_tree_width : 0);
  if (budget->rows + rows > o.draft_max_batch_tokens) return;  // Next phase.
  budget->rows += rows;
  d.tree_siblings = o.draft_tree_siblings;
  d.max_nodes = o.max_k;
  // Nodes beyond the chain pay for their verify rows, except in a tree whose size the
  // request set (it gets that many nodes, as a fixed K gets K).
  d.node_value_threshold = d.tree_nodes > 0 && sized_by_request
                               ? 0
                               : spec::NodeValueThreshold(s->PlannedRate(), plan->verify_cost, k);
  v1::DraftSequence* entry =
      AddDraftEntry(s, WorkerId(s->id(), d.main_slot), slot, start, tokens.data() + start,
                    tokens.data() + length, k, false, o, plan);
  plan->draft_tree_option = plan->draft_tree_option || d.tree_option;
  if (d.tree_nodes > 0) {
    entry->set_tree_nodes(d.tree_nodes);
    entry->set_tree_width(o.draft_tree_width);
    entry->clear_num_top();
  }
}

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

void DraftProposer::OnPrefilled(const Sequence& s, ProposerState& state,
                                const v1::PrefillSequence& fed) const {
  Of(state).Fed(fed.start_position(), fed.tokens(), nullptr);
}

std::optional<Candidates> DraftProposer::OnDrafted(const Sequence& s, ProposerState& state,
                                                   const v1::DraftSequence& request,
                                                   const v1::DraftedSequence& response,
                                                   bool continuation) const {
  DraftState& d = Of(state);
  std::vector<v1::ProposedToken> drafted(response.proposals().begin(), response.proposals().end());
  std::vector<v1::TopTokens> top(response.top().begin(), response.top().end());
  if (continuation) {
    for (Branch& b : d.branches) {
      if (WorkerId(s.id(), b.slot) != request.sequence_id()) continue;
      b.cache.insert(b.cache.end(), request.tokens().begin(), request.tokens().end());
      for (size_t i = 0; i + 1 < drafted.size(); ++i) b.cache.push_back(drafted[i].token());
      b.proposals = std::move(drafted);
      b.top = std::move(top);
    }
    return std::nullopt;
  }
  const bool tree = request.tree_nodes() > 0;
  d.Fed(request.start_position(), request.tokens(), tree ? nullptr : &response);
  d.top = std::move(top);
  Candidates c;
  c.method = method();
  c.site = ProposerSite::kDraftWorker;
  c.tokens = std::move(drafted);
  if (tree) {
    c.tree_option = d.tree_option;
    PruneDraftTree(response, d.tree_depth, d.node_value_threshold, &c);
  } else if (d.tree_siblings > 0 && TakesDeterministicSiblings(s)) {
    AttachSiblings(d.top, d.tree_siblings, d.max_nodes, d.node_value_threshold, &c);
  }
  return c;
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

void DraftProposer::Reset(const Sequence& s, ProposerState& state) const {
  DraftState& d = Of(state);
  d.cache.clear();
  d.branches.clear();
  d.top.clear();
}

void DraftProposer::AppendWorkerIds(const Sequence& s, const ProposerState& state,
                                    std::vector<uint64_t>* ids) const {
  const uint32_t used = static_cast<const DraftState&>(state).used_slots;
  for (int slot = 1; slot < 32; ++slot) {
    if (used & (1u << slot)) ids->push_back(WorkerId(s.id(), slot));
  }
}

}  // namespace tandem::coordinator
