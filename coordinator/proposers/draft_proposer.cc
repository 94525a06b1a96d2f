#include "coordinator/proposers/draft_proposer.h"

#include <algorithm>

#include "coordinator/sequence.h"

namespace tandem::coordinator {
namespace {

struct DraftState : ProposerState {
  // What the draft worker has cached, position by position (may run past the committed
  // tokens after drafting). Cleared when its state is unknown.
  std::vector<int32_t> cache;
  // Optimistic continuation drafted during the last verify: valid only when that
  // verify accepts everything and its bonus token equals continuation[0].
  std::vector<v1::ProposedToken> continuation;

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

void AddDraftEntry(Sequence* s, int slot, uint32_t start, const int32_t* begin, const int32_t* end,
                   int k, bool continuation, const PlannerOptions& o, PhasePlan* plan) {
  v1::DraftSequence* d = plan->draft.add_sequences();
  d->set_sequence_id(s->id());
  d->set_start_position(start);
  d->mutable_tokens()->Add(begin, end);
  d->set_num_draft_tokens(k);
  *d->mutable_sampling() = ToSequenceSampling(s->request());
  d->set_proposal_top_k(o.proposal_top_k);
  plan->draft_sequences.push_back(s);
  plan->draft_is_continuation.push_back(continuation);
  plan->draft_slots.push_back(slot);
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

void DraftProposer::AddWork(Sequence* s, ProposerState& state, int slot, int k,
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
    p->set_sequence_id(s->id());
    p->set_start_position(start);
    p->mutable_tokens()->Add(tokens.begin() + start, tokens.begin() + start + chunk);
    plan->draft_prefill_sequences.push_back(s);
    plan->draft_prefill_slots.push_back(slot);
    return;
  }
  if (budget->rows + fed > o.draft_max_batch_tokens) return;  // Next phase.
  budget->rows += fed;
  AddDraftEntry(s, slot, start, tokens.data() + start, tokens.data() + length, k, false, o, plan);
}

// The continuation guesses the bonus token and drafts the next step's candidates after
// it, so it is capped by the tokens still to generate and by both contexts.
void DraftProposer::AddContinuation(Sequence* s, ProposerState& state, int slot, int next_k,
                                    const PlannerOptions& o, DraftBudget* budget,
                                    PhasePlan* plan) const {
  DraftState& d = Of(state);
  const int k = s->candidates.size();
  const int length = static_cast<int>(s->tokens().size());
  const size_t expected = length + k - 1;  // The cache holds tokens + candidates[0, K-1).
  if (k == 0 || d.cache.size() != expected || d.ValidLength(s->tokens()) != length) return;
  if (budget->rows + 1 > o.draft_max_batch_tokens) return;
  // Positions expected .. expected + more must fit the contexts; after a full accept
  // (k + 1 tokens) at most remaining - k - 1 tokens are left, so more - 1 candidates
  // after the bonus guess are useful only up to remaining - k - 2.
  const int context = std::min(o.context_length, o.draft_context_length);
  const int more = std::min({next_k + 1, o.draft_max_k, context - static_cast<int>(expected) - 1,
                             s->remaining() - k - 1});
  if (more < 2) return;  // The first continuation token only guesses the bonus.
  budget->rows += 1;
  const int32_t last = s->candidates.tokens.back().token();
  AddDraftEntry(s, slot, static_cast<uint32_t>(expected), &last, &last + 1, more, true, o, plan);
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
  d.Fed(request.start_position(), request.tokens(), &response);
  std::vector<v1::ProposedToken> drafted(response.proposals().begin(), response.proposals().end());
  if (continuation) {
    d.continuation = std::move(drafted);
    return std::nullopt;
  }
  Candidates c;
  c.method = method();
  c.site = ProposerSite::kDraftWorker;
  c.tokens = std::move(drafted);
  return c;
}

std::optional<Candidates> DraftProposer::OnVerified(const Sequence& s, ProposerState& state,
                                                    const Candidates& verified,
                                                    const v1::VerifiedSequence& result,
                                                    int committed) const {
  DraftState& d = Of(state);
  // The continuation is usable only if the target took every candidate (all of them
  // ours) and its bonus token is the continuation's first token.
  const int proposed = verified.size();
  std::optional<Candidates> next;
  if (!d.continuation.empty() && proposed > 0 && verified.method == method() &&
      static_cast<int>(result.num_accepted()) == proposed &&
      result.committed_size() == proposed + 1 && committed == proposed + 1 &&
      result.committed(proposed) == d.continuation[0].token()) {
    next.emplace();
    next->method = method();
    next->site = ProposerSite::kDraftWorker;
    next->tokens.assign(d.continuation.begin() + 1, d.continuation.end());
  }
  d.continuation.clear();
  return next;
}

void DraftProposer::Reset(const Sequence& s, ProposerState& state) const {
  Of(state).cache.clear();
  Of(state).continuation.clear();
}

}  // namespace tandem::coordinator
