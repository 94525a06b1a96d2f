#include "coordinator/step_planner.h"

#include <algorithm>

#include "coordinator/draft_feed_budget.h"
#include "coordinator/step_choice.h"

namespace tandem::coordinator {
namespace {

int Uncached(const Sequence& s) { return static_cast<int>(s.tokens().size()) - s.target_cached; }

// Candidates proposed on the draft worker (the side ping-pong and continuations serve).
bool HasDraftWorkerCandidates(const Sequence& s) {
  return !s.candidates.empty() && s.candidates.site == ProposerSite::kDraftWorker;
}

// A coordinator-site proposer's candidates for `s` when it was chosen and `s` has none:
// depth choice.k, nodes within what one verify may carry for `s` (max_k, the most
// proposals the target takes and KV admission reserves, and the context left).
// Returns whether it proposed.
bool ProposeOnCoordinator(Sequence* s, const StepChoice& choice, const PlannerOptions& o) {
  if (!s->candidates.empty() || choice.slot < 0 ||
      s->proposer(choice.slot).capabilities().site != ProposerSite::kCoordinator) {
    return false;
  }
  const int max_nodes = std::min(o.max_k, o.context_length - static_cast<int>(s->tokens().size()));
  s->candidates =
      s->proposer(choice.slot)
          .Propose(*s, s->proposer_state(choice.slot), choice.k, std::max(max_nodes, choice.k));
  return true;
}

void AddVerify(Sequence* s, PhasePlan* plan) {
  if (!s->candidates.empty()) s->mutable_stats().steps_by_method[s->candidates.method] += 1;
  v1::VerifySequence* v = plan->verify.add_sequences();
  v->set_sequence_id(s->id());
  v->set_start_position(s->target_cached);
  v->mutable_tokens()->Add(s->tokens().begin() + s->target_cached, s->tokens().end());
  for (const v1::ProposedToken& p : s->candidates.tokens) *v->add_proposals() = p;
  v->mutable_proposal_parents()->Add(s->candidates.parents.begin(), s->candidates.parents.end());
  if (s->candidates.acceptable >= 0) v->set_num_acceptable(s->candidates.acceptable);
  *v->mutable_sampling() = ToSequenceSampling(s->request());
  v->set_sample_index(s->sample_index());
  plan->verify_sequences.push_back(s);
  plan->verify_proposed.push_back(s->candidates.depth());
}

// The sequences of one phase, sorted by what they need.
struct Groups {
  std::vector<Sequence*> prefill;  // Target prefill chunks.
  std::vector<Sequence*> ready;    // Verifiable now.
  std::vector<StepChoice> ready_choice;
  std::vector<Sequence*> need_work;  // Waiting for draft-worker candidates.
  std::vector<StepChoice> need_choice;
  // Decoding plain while their draft-worker proposer is fed what it lacks.
  std::vector<Sequence*> catch_up;
  std::vector<StepChoice> catch_up_choice;
};

// Candidates a target-leader proposer returned with the last verify are verified only
// when the controller (or a fixed K) chose that proposer with K > 0 for this step, and
// then fitted to the phase's verify cost first (Proposer::FitCandidates); otherwise the
// step is plain (the off reason is the choice's). The verify asks for next candidates
// only when the proposer is the choice (PhasePlan::verify_slots), so a choice that
// finds none (the sequence's first step, or the first after the method was off) runs
// plain, deferred, and fetches them for the next step.
void PrepareTargetCandidates(Sequence* s, const StepChoice& c, const WorkerAvailability& workers) {
  const bool chosen = c.slot >= 0 && c.k > 0;
  if (!s->candidates.empty() && s->candidates.site == ProposerSite::kTargetLeader &&
      !(chosen && s->proposer(c.slot).method() == s->candidates.method)) {
    s->candidates.Clear();
  }
  if (!chosen || s->proposer(c.slot).capabilities().site != ProposerSite::kTargetLeader) return;
  if (s->candidates.empty()) {
    DeferChoice(*s, "candidates_pending");
    return;
  }
  s->proposer(c.slot).FitCandidates(s, s->proposer_state(c.slot), workers.verify_cost);
}

Groups Classify(const std::vector<Sequence*>& running, const PlannerOptions& o,
                const WorkerAvailability& workers, PhasePlan* plan) {
  Groups g;
  const bool sequential = !plan->pipelined || workers.pipeline_mode == PipelineMode::kSequential;
  const std::vector<StepChoice> choices = ChooseSteps(running, o, workers, sequential);
  for (size_t i = 0; i < running.size(); ++i) {
    Sequence* s = running[i];
    const StepChoice& c = choices[i];
    s->skip_draft_once = false;
    PrepareTargetCandidates(s, c, workers);
    if (c.fallback != nullptr) {
      s->mutable_stats().fallback_steps += 1;
      plan->fallbacks[c.fallback] += 1;
    }
    const bool needs_prefill = Uncached(*s) - 1 > o.prefill_chunk;
    if (needs_prefill) g.prefill.push_back(s);
    const bool worker_proposer =
        c.slot >= 0 && s->proposer(c.slot).capabilities().site == ProposerSite::kDraftWorker;
    if (worker_proposer && s->candidates.empty() && NeedsCatchUp(*s, c, o)) {
      DeferChoice(*s, "draft_catch_up");
      g.catch_up.push_back(s);
      g.catch_up_choice.push_back(c);
      if (!needs_prefill) {
        g.ready.push_back(s);
        g.ready_choice.push_back(StepChoice());
      }
    } else if (worker_proposer && s->candidates.empty()) {
      g.need_work.push_back(s);
      g.need_choice.push_back(c);
    } else if (!needs_prefill) {
      g.ready.push_back(s);
      g.ready_choice.push_back(c);
    }
  }
  return g;
}

// Marks the sequences waiting for fresh draft work that are verified plain this phase
// instead, their next step pre-drafted meanwhile (PlannerOptions::predraft_plain_steps):
// with continuations, when the target has other work in the phase anyway (a sequence
// to verify or a prompt to prefill), for chain choices of proposers that can.
void ChoosePlainPredrafts(const Groups& g, const PlannerOptions& o, std::vector<bool>* work_now,
                          std::vector<bool>* predraft) {
  if (!o.predraft_plain_steps || (g.ready.empty() && g.prefill.empty())) return;
  for (size_t i = 0; i < g.need_work.size(); ++i) {
    Sequence* s = g.need_work[i];
    const StepChoice& c = g.need_choice[i];
    if (c.tree || Uncached(*s) - 1 > o.prefill_chunk ||
        !s->proposer(c.slot).PredraftsPlainSteps(*s, c.k, o)) {
      continue;
    }
    (*predraft)[i] = true;
    (*work_now)[i] = false;
  }
}

// Which ready sequences this phase verifies and which waiting ones get draft work or,
// in lockstep with continuations, a plain verify with their next step pre-drafted
// (`predraft`, parallel to g.need_work); the mode: sequential, lockstep or ping-pong
// (see step_planner.h).
void ChooseMode(const Groups& g, int n, const PlannerOptions& o, const WorkerAvailability& workers,
                PhasePlan* plan, std::vector<bool>* verify_now, std::vector<bool>* work_now,
                std::vector<bool>* predraft, bool* continuations) {
  verify_now->assign(g.ready.size(), true);
  work_now->assign(g.need_work.size(), true);
  predraft->assign(g.need_work.size(), false);
  *continuations = false;
  plan->mode = plan->pipelined ? workers.pipeline_mode : PipelineMode::kSequential;
  if (plan->mode == PipelineMode::kPingPong && (n < 2 || !workers.draft)) {
    plan->mode = PipelineMode::kLockstep;
  }
  plan->ping_pong = plan->mode == PipelineMode::kPingPong;
  const bool lockstep = plan->mode == PipelineMode::kLockstep;
  if (!plan->ping_pong) {
    // Sequential or lockstep: fresh drafts first, then every draft-worker user is
    // verified together (with continuations drafted meanwhile when pipelining). When
    // pipelining, sequences that need no draft work are verified during the draft
    // phase too instead of idling the target; with continuations, a sequence waiting
    // for a fresh draft in a phase the target works in anyway is verified plain with
    // its next step pre-drafted, and then nobody waits for the draft.
    *continuations = lockstep && o.optimistic && n <= o.optimistic_max_batch && workers.draft;
    if (*continuations) ChoosePlainPredrafts(g, o, work_now, predraft);
    const bool fresh_drafts =
        std::find(work_now->begin(), work_now->end(), true) != work_now->end();
    if (fresh_drafts) {
      for (size_t i = 0; i < g.ready.size(); ++i) {
        (*verify_now)[i] = lockstep && !HasDraftWorkerCandidates(*g.ready[i]);
      }
    }
  } else if (g.ready.empty() && g.need_work.size() >= 2) {
    // Start the ping-pong: draft half now, the other half while the first verifies.
    for (size_t i = (g.need_work.size() + 1) / 2; i < g.need_work.size(); ++i) {
      (*work_now)[i] = false;
    }
  } else if (g.need_work.empty()) {
    // Everything is ready: verify half of the draft-worker users so that the draft has
    // work (the other half) in the next phase.
    std::vector<size_t> users;
    for (size_t i = 0; i < g.ready.size(); ++i) {
      if (HasDraftWorkerCandidates(*g.ready[i])) users.push_back(i);
    }
    if (users.size() >= 2) {
      for (size_t j = (users.size() + 1) / 2; j < users.size(); ++j) {
        (*verify_now)[users[j]] = false;
      }
    }
  }
}

// Target: prefill chunks, then verifies within the row budget: the ready sequences
// chosen, then those verified plain while their next step is pre-drafted (`predraft`,
// parallel to g.need_work; off reason "predrafting", their choice deferred).
// `chosen` gets, parallel to plan->verify_sequences, the choice made for each this
// phase (what a continuation drafted meanwhile should propose), and `predraft_k` the K
// a plain step's pre-draft is for (0: none).
void PlanTarget(const Groups& g, const std::vector<bool>& verify_now,
                const std::vector<bool>& predraft, const PlannerOptions& o, PhasePlan* plan,
                std::vector<StepChoice>* chosen, std::vector<int>* predraft_k) {
  int prefill_left = std::min(o.prefill_budget, o.target_max_batch_tokens);
  int target_rows = 0;
  for (Sequence* s : g.prefill) {
    const int chunk = std::min({o.prefill_chunk, Uncached(*s) - 1, prefill_left});
    if (chunk <= 0) break;
    prefill_left -= chunk;
    target_rows += chunk;
    v1::PrefillSequence* p = plan->target_prefill.add_sequences();
    p->set_sequence_id(s->id());
    p->set_start_position(s->target_cached);
    p->mutable_tokens()->Add(s->tokens().begin() + s->target_cached,
                             s->tokens().begin() + s->target_cached + chunk);
  }
  for (size_t i = 0; i < g.ready.size(); ++i) {
    if (!verify_now[i]) continue;
    Sequence* s = g.ready[i];
    // Rows count the candidates' nodes (a tree verifies every node).
    const bool proposed = ProposeOnCoordinator(s, g.ready_choice[i], o);
    const int k = s->candidates.empty() ? g.ready_choice[i].k : s->candidates.size();
    const int rows = Uncached(*s) + k;
    if (target_rows + rows > o.target_max_batch_tokens && !plan->verify_sequences.empty()) {
      if (proposed) s->candidates.Clear();  // Proposed afresh when it is verified.
      continue;                             // Next phase.
    }
    target_rows += rows;
    AddVerify(s, plan);
    chosen->push_back(g.ready_choice[i]);
    predraft_k->push_back(0);
  }
  for (size_t i = 0; i < g.need_work.size(); ++i) {
    Sequence* s = g.need_work[i];
    if (!predraft[i]) continue;
    if (target_rows + Uncached(*s) > o.target_max_batch_tokens && !plan->verify_sequences.empty()) {
      continue;  // Next phase.
    }
    target_rows += Uncached(*s);
    DeferChoice(*s, "predrafting");
    AddVerify(s, plan);
    chosen->push_back({g.need_choice[i].slot, 0});
    predraft_k->push_back(g.need_choice[i].k);
  }
}

// The slot of the proposer that made `s`'s candidates (-1: none of its chain).
int CandidateSlot(const Sequence& s) {
  for (int slot = 0; slot < s.chain_size(); ++slot) {
    if (s.proposer(slot).method() == s.candidates.method) return slot;
  }
  return -1;
}

}  // namespace

bool PipeliningWanted(const std::vector<Sequence*>& running, bool server_default) {
  bool any_on = false;
  for (const Sequence* s : running) {
    v1::Pipelining p = s->request().speculation.pipelining;
    if (p == v1::PIPELINING_OFF) return false;
    any_on |= p == v1::PIPELINING_ON;
  }
  return server_default || any_on;
}

PhasePlan PlanPhase(const std::vector<Sequence*>& running, const PlannerOptions& o,
                    const WorkerAvailability& workers) {
  PhasePlan plan;
  plan.verify_cost = workers.verify_cost;
  plan.cost_batch = workers.cost_batch > 0 ? workers.cost_batch : static_cast<int>(running.size());
  if (!workers.target || running.empty()) return plan;
  const int n = static_cast<int>(running.size());
  plan.pipelined = PipeliningWanted(running, o.pipelining);
  const Groups g = Classify(running, o, workers, &plan);
  std::vector<bool> verify_now, work_now, predraft;
  bool continuations = false;
  ChooseMode(g, n, o, workers, &plan, &verify_now, &work_now, &predraft, &continuations);
  std::vector<StepChoice> chosen;
  std::vector<int> predraft_k;
  PlanTarget(g, verify_now, predraft, o, &plan, &chosen, &predraft_k);
  for (const StepChoice& c : chosen) plan.verify_slots.push_back(c.k > 0 ? c.slot : -1);

  // Draft worker: continuations of what is being verified, then fresh work.
  DraftBudget budget;
  budget.prefill_left = std::min(o.prefill_budget, HiddenDraftFeedTokens(plan, n, o, workers));
  budget.predraft_tokens_left = workers.predraft_token_budget;
  if (continuations) {
    for (size_t i = 0; i < plan.verify_sequences.size(); ++i) {
      Sequence* s = plan.verify_sequences[i];
      if (predraft_k[i] > 0) {  // Verified plain: its next step is pre-drafted.
        const int slot = chosen[i].slot;
        s->proposer(slot).AddContinuation(s, s->proposer_state(slot), slot, predraft_k[i], o,
                                          &budget, &plan);
        continue;
      }
      const int slot = HasDraftWorkerCandidates(*s) ? CandidateSlot(*s) : -1;
      // The step after continues with this proposer only if it is still the choice (and
      // as a chain: trees are not pre-drafted).
      const int next_k = chosen[i].slot == slot && !chosen[i].tree ? chosen[i].k : 0;
      if (slot >= 0 && next_k > 0) {
        s->proposer(slot).AddContinuation(s, s->proposer_state(slot), slot, next_k, o, &budget,
                                          &plan);
      }
    }
  }
  for (size_t i = 0; i < g.need_work.size(); ++i) {
    if (!work_now[i]) continue;
    Sequence* s = g.need_work[i];
    const int slot = g.need_choice[i].slot;
    s->proposer(slot).AddWork(s, s->proposer_state(slot), slot, g.need_choice[i].k,
                              g.need_choice[i].tree, o, &budget, &plan);
  }
  for (size_t i = 0; i < g.catch_up.size(); ++i) {
    Sequence* s = g.catch_up[i];
    const int slot = g.catch_up_choice[i].slot;
    s->proposer(slot).AddWork(s, s->proposer_state(slot), slot, g.catch_up_choice[i].k,
                              g.catch_up_choice[i].tree, o, &budget, &plan);
  }
  return plan;
}

}  // namespace tandem::coordinator
