#include "coordinator/proposers/draft_proposer.h"

#include <algorithm>

#include "coordinator/proposers/draft_proposer_internal.h"
#include "coordinator/proposers/draft_tree_pruning.h"
#include "coordinator/proposers/outcome_ranking.h"
#include "coordinator/sequence.h"

namespace tandem::coordinator {
namespace draft_internal {

bool TakesDeterministicSiblings(const Sequence& s) {
  const v1::SequenceSampling sampling = ToSequenceSampling(s.request());
  return sampling.temperature() == 0 || sampling.rule() == v1::ACCEPTANCE_RULE_COUPLED;
}

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

}  // namespace draft_internal

namespace {

using draft_internal::AddDraftEntry;
using draft_internal::AttachSiblings;
using draft_internal::Branch;
using draft_internal::DraftState;
using draft_internal::Of;
using draft_internal::TakesDeterministicSiblings;
using draft_internal::WorkerId;

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
      if (b.plain) d.cache = b.cache;  // Drafted on the main id itself.
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
