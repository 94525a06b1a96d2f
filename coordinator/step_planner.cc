#include "coordinator/step_planner.h"

#include <algorithm>

namespace tandem::coordinator {
namespace {

enum class Proposer { kNone, kDraft, kPromptLookup };

struct Choice {
  Proposer proposer = Proposer::kNone;
  int k = 0;
  // Why the requested proposer is not used this step (nullptr: it is, or none was
  // requested): "draft_down", "draft_rejected", "draft_kv" or "batch_limit".
  const char* fallback = nullptr;
};

// The draft when it can be used for `s` this step, else the reason it cannot.
const char* DraftUnusableReason(const Sequence& s, const WorkerAvailability& workers) {
  if (!workers.draft) return "draft_down";
  if (!s.draft_allowed) return "draft_kv";
  if (s.skip_draft_once) return "draft_rejected";
  return nullptr;
}

Choice ChooseProposer(Sequence& s, int running, const PlannerOptions& o,
                      const WorkerAvailability& workers) {
  const ResolvedSpeculation& spec = s.request().speculation;
  const int length = static_cast<int>(s.tokens().size());
  // Proposals past the last token we may generate, or past the context, are useless.
  const int cap = std::min({o.max_k, s.remaining() - 1, o.context_length - length});
  if (spec.method == v1::SPECULATION_METHOD_NONE || cap <= 0) return {};
  if (!spec.fixed_k.has_value() && running > o.speculation_max_batch) {
    return {Proposer::kNone, 0, "batch_limit"};
  }
  int k = spec.fixed_k.has_value() ? *spec.fixed_k : s.adaptive_k().NextK();
  k = std::clamp(k, 0, cap);
  if (k == 0) return {};
  const char* draft_unusable = DraftUnusableReason(s, workers);
  const int draft_k = std::min({k, o.draft_max_k, o.draft_context_length - length});
  switch (spec.method) {
    case v1::SPECULATION_METHOD_DRAFT:
      if (draft_unusable == nullptr && draft_k > 0) return {Proposer::kDraft, draft_k, nullptr};
      return {Proposer::kNone, 0, draft_unusable ? draft_unusable : "draft_context"};
    case v1::SPECULATION_METHOD_PROMPT_LOOKUP:
      return {Proposer::kPromptLookup, k, nullptr};
    case v1::SPECULATION_METHOD_AUTO:
      if (draft_unusable == nullptr && draft_k > 0) return {Proposer::kDraft, draft_k, nullptr};
      return {Proposer::kPromptLookup, k, draft_unusable ? draft_unusable : "draft_context"};
    default:
      return {};
  }
}

bool PipeliningWanted(const std::vector<Sequence*>& running, bool server_default) {
  bool any_on = false;
  for (const Sequence* s : running) {
    v1::Pipelining p = s->request().speculation.pipelining;
    if (p == v1::PIPELINING_OFF) return false;
    any_on |= p == v1::PIPELINING_ON;
  }
  return server_default || any_on;
}

v1::ProposedToken PointMassProposal(int32_t token) {
  v1::ProposedToken p;
  p.set_token(token);
  p.add_q_ids(token);
  p.add_q_probs(1.0f);
  return p;
}

int Uncached(const Sequence& s) { return static_cast<int>(s.tokens().size()) - s.target_cached; }

void AddVerify(Sequence* s, const Choice& choice, PhasePlan* plan) {
  if (!s->has_proposals && choice.proposer == Proposer::kPromptLookup) {
    std::vector<int32_t> guess = s->prompt_lookup().Propose(choice.k);
    s->proposals.clear();
    for (int32_t t : guess) s->proposals.push_back(PointMassProposal(t));
    s->has_proposals = !guess.empty();
    s->proposal_method = v1::SPECULATION_METHOD_PROMPT_LOOKUP;
    s->mutable_stats().prompt_lookup_steps += 1;
  }
  if (!s->has_proposals) {
    s->proposals.clear();
    s->proposal_method = v1::SPECULATION_METHOD_NONE;
  } else if (s->proposal_method == v1::SPECULATION_METHOD_DRAFT) {
    s->mutable_stats().draft_steps += 1;
  }
  v1::VerifySequence* v = plan->verify.add_sequences();
  v->set_sequence_id(s->id());
  v->set_start_position(s->target_cached);
  v->mutable_tokens()->Add(s->tokens().begin() + s->target_cached, s->tokens().end());
  for (const v1::ProposedToken& p : s->proposals) *v->add_proposals() = p;
  *v->mutable_sampling() = ToSequenceSampling(s->request());
  v->set_sample_index(s->sample_index());
  plan->verify_sequences.push_back(s);
  plan->verify_proposed.push_back(static_cast<int>(s->proposals.size()));
}

// Draft-side budgets of one phase: Draft rows and draft prefill tokens.
struct DraftBudget {
  int rows = 0;          // Rows of the Draft call so far.
  int prefill_left = 0;  // Draft prefill tokens still allowed this phase.
};

void AddDraft(Sequence* s, int k, const PlannerOptions& o, DraftBudget* budget, PhasePlan* plan) {
  const int length = static_cast<int>(s->tokens().size());
  const int start = std::min(s->DraftValidLength(), length - 1);
  const int fed = length - start;
  if (fed > o.draft_max_batch_tokens / 2) {
    // A long uncached stretch (a new prompt): prefill the draft in chunks first, within
    // the phase's draft prefill budget (later sequences wait for the next phase).
    const int chunk = std::min({o.prefill_chunk, fed - 1, budget->prefill_left});
    if (chunk <= 0) return;
    budget->prefill_left -= chunk;
    v1::PrefillSequence* p = plan->draft_prefill.add_sequences();
    p->set_sequence_id(s->id());
    p->set_start_position(start);
    p->mutable_tokens()->Add(s->tokens().begin() + start, s->tokens().begin() + start + chunk);
    return;
  }
  if (budget->rows + fed > o.draft_max_batch_tokens) return;  // Next phase.
  budget->rows += fed;
  v1::DraftSequence* d = plan->draft.add_sequences();
  d->set_sequence_id(s->id());
  d->set_start_position(start);
  d->mutable_tokens()->Add(s->tokens().begin() + start, s->tokens().end());
  d->set_num_draft_tokens(k);
  *d->mutable_sampling() = ToSequenceSampling(s->request());
  d->set_proposal_top_k(o.proposal_top_k);
  plan->draft_sequences.push_back(s);
  plan->draft_is_continuation.push_back(false);
}

// Optimistic continuation of a sequence whose draft proposals are about to be
// verified: the draft cache must hold tokens + proposals[0, K-1). The continuation
// guesses the bonus token and drafts the next step's proposals after it, so it is
// capped by the tokens still to generate and by both contexts.
void AddContinuation(Sequence* s, const PlannerOptions& o, DraftBudget* budget, PhasePlan* plan) {
  const int k = static_cast<int>(s->proposals.size());
  const int length = static_cast<int>(s->tokens().size());
  const size_t expected = length + k - 1;
  if (k == 0 || s->draft_cache.size() != expected || s->DraftValidLength() != length) return;
  if (budget->rows + 1 > o.draft_max_batch_tokens) return;
  // Positions expected .. expected + more must fit the contexts; after a full accept
  // (k + 1 tokens) at most remaining - k - 1 tokens are left, so more - 1 proposals
  // after the bonus guess are useful only up to remaining - k - 2.
  const int context = std::min(o.context_length, o.draft_context_length);
  const int more = std::min(
      {k + 1, o.draft_max_k, context - static_cast<int>(expected) - 1, s->remaining() - k - 1});
  if (more < 2) return;  // The first continuation token only guesses the bonus.
  budget->rows += 1;
  v1::DraftSequence* d = plan->draft.add_sequences();
  d->set_sequence_id(s->id());
  d->set_start_position(static_cast<uint32_t>(expected));
  d->add_tokens(s->proposals.back().token());
  d->set_num_draft_tokens(more);
  *d->mutable_sampling() = ToSequenceSampling(s->request());
  d->set_proposal_top_k(o.proposal_top_k);
  plan->draft_sequences.push_back(s);
  plan->draft_is_continuation.push_back(true);
}

}  // namespace

PhasePlan PlanPhase(const std::vector<Sequence*>& running, const PlannerOptions& o,
                    const WorkerAvailability& workers) {
  PhasePlan plan;
  if (!workers.target || running.empty()) return plan;
  const int n = static_cast<int>(running.size());
  const bool pipelined = PipeliningWanted(running, o.pipelining);
  plan.pipelined = pipelined;

  std::vector<Sequence*> prefill, ready, need_draft;
  std::vector<Choice> choice_of(n);
  std::vector<Choice> ready_choice, need_choice;
  for (int i = 0; i < n; ++i) {
    Sequence* s = running[i];
    Choice c = ChooseProposer(*s, n, o, workers);
    s->skip_draft_once = false;
    if (c.fallback != nullptr) {
      s->mutable_stats().fallback_steps += 1;
      plan.fallbacks[c.fallback] += 1;
    }
    const bool needs_prefill = Uncached(*s) - 1 > o.prefill_chunk;
    if (needs_prefill) prefill.push_back(s);
    if (c.proposer == Proposer::kDraft && !s->has_proposals) {
      need_draft.push_back(s);
      need_choice.push_back(c);
    } else if (!needs_prefill) {
      ready.push_back(s);
      ready_choice.push_back(c);
    }
  }

  // Which sequences this phase verifies (V), drafts (D) and continues (C).
  std::vector<bool> verify_now(ready.size(), true);
  std::vector<bool> draft_now(need_draft.size(), true);
  bool continuations = false;
  const bool ping_pong =
      pipelined && n >= 2 && workers.draft && workers.draft_verify_ratio >= o.pingpong_min_ratio;
  plan.ping_pong = ping_pong;
  if (!ping_pong) {
    // Sequential or lockstep: fresh drafts first, then every draft user is verified
    // together (with continuations drafted meanwhile when pipelining). When
    // pipelining, sequences that need no draft (plain decoding, prompt lookup) are
    // verified during the draft phase too instead of idling the target.
    if (!need_draft.empty()) {
      for (size_t i = 0; i < ready.size(); ++i) {
        const bool draft_user =
            ready[i]->has_proposals && ready[i]->proposal_method == v1::SPECULATION_METHOD_DRAFT;
        verify_now[i] = pipelined && !draft_user;
      }
    }
    continuations = pipelined && o.optimistic && n <= o.optimistic_max_batch && workers.draft;
  } else if (ready.empty() && need_draft.size() >= 2) {
    // Start the ping-pong: draft half now, the other half while the first verifies.
    for (size_t i = (need_draft.size() + 1) / 2; i < need_draft.size(); ++i) draft_now[i] = false;
  } else if (need_draft.empty()) {
    // Everything is ready: verify half of the draft users so that the draft has work
    // (the other half) in the next phase.
    std::vector<size_t> users;
    for (size_t i = 0; i < ready.size(); ++i) {
      if (ready[i]->has_proposals && ready[i]->proposal_method == v1::SPECULATION_METHOD_DRAFT) {
        users.push_back(i);
      }
    }
    if (users.size() >= 2) {
      for (size_t j = (users.size() + 1) / 2; j < users.size(); ++j) verify_now[users[j]] = false;
    }
  }

  // Target: prefill chunks, then verifies within the row budget.
  int prefill_left = std::min(o.prefill_budget, o.target_max_batch_tokens);
  int target_rows = 0;
  for (Sequence* s : prefill) {
    const int chunk = std::min({o.prefill_chunk, Uncached(*s) - 1, prefill_left});
    if (chunk <= 0) break;
    prefill_left -= chunk;
    target_rows += chunk;
    v1::PrefillSequence* p = plan.target_prefill.add_sequences();
    p->set_sequence_id(s->id());
    p->set_start_position(s->target_cached);
    p->mutable_tokens()->Add(s->tokens().begin() + s->target_cached,
                             s->tokens().begin() + s->target_cached + chunk);
  }
  for (size_t i = 0; i < ready.size(); ++i) {
    if (!verify_now[i]) continue;
    Sequence* s = ready[i];
    const int k = s->has_proposals ? static_cast<int>(s->proposals.size()) : ready_choice[i].k;
    const int rows = Uncached(*s) + k;
    if (target_rows + rows > o.target_max_batch_tokens && !plan.verify_sequences.empty()) {
      continue;  // Next phase.
    }
    target_rows += rows;
    AddVerify(s, ready_choice[i], &plan);
  }

  // Draft: continuations of what is being verified, then fresh drafts.
  DraftBudget draft_budget;
  draft_budget.prefill_left = std::min(o.prefill_budget, o.draft_max_batch_tokens);
  if (continuations) {
    for (Sequence* s : plan.verify_sequences) {
      if (s->has_proposals && s->proposal_method == v1::SPECULATION_METHOD_DRAFT) {
        AddContinuation(s, o, &draft_budget, &plan);
      }
    }
  }
  for (size_t i = 0; i < need_draft.size(); ++i) {
    if (draft_now[i]) AddDraft(need_draft[i], need_choice[i].k, o, &draft_budget, &plan);
  }
  return plan;
}

}  // namespace tandem::coordinator
