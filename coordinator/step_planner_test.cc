// Policy tests of PlanPhase on plain Sequence objects (no workers, no I/O).
#include "coordinator/step_planner.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "coordinator/proposers/test_util.h"

namespace tandem::coordinator {
namespace {

using v1::SpeculationMethod;

struct Fixture {
  std::vector<std::unique_ptr<Sequence>> owned;
  std::vector<Sequence*> running;

  Sequence* Add(SpeculationMethod method, int prompt_len = 8, int max_new = 64,
                std::optional<int> fixed_k = 4) {
    ValidatedRequest r;
    r.speculation.method = method;
    r.speculation.fixed_k = fixed_k;
    r.max_new_tokens = max_new;
    std::vector<int32_t> prompt(prompt_len);
    std::iota(prompt.begin(), prompt.end(), 10);
    owned.push_back(testing::MakeSequence(owned.size() + 1, r, prompt, max_new));
    Sequence* s = owned.back().get();
    s->target_cached = 0;
    running.push_back(s);
    return s;
  }
};

// Gives `s` k drafted proposals, with the draft cache as a Draft call leaves it.
void GiveDraftProposals(Sequence* s, int k) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < k; ++i) tokens.push_back(100 + i);
  testing::GiveDraftCandidates(s, tokens);
}

PlannerOptions Options(bool pipelining, bool optimistic = false) {
  PlannerOptions o;
  o.pipelining = pipelining;
  o.optimistic = optimistic;
  return o;
}

// Which workers are up, and the mode the engine chose for pipelined phases.
WorkerAvailability Workers(bool draft, bool target, PipelineMode mode = PipelineMode::kLockstep) {
  WorkerAvailability w;
  w.draft = draft;
  w.target = target;
  w.pipeline_mode = mode;
  return w;
}

const WorkerAvailability kBoth = Workers(true, true);
// Drafting costs as much as verifying: the engine chose ping-pong.
const WorkerAvailability kExpensiveDraft = Workers(true, true, PipelineMode::kPingPong);
// Drafting is cheap next to verifying: lockstep with continuations.
const WorkerAvailability kCheapDraft = Workers(true, true, PipelineMode::kLockstep);
// The fits predict no gain from overlap: sequential although pipelining is on.
const WorkerAvailability kNoGain = Workers(true, true, PipelineMode::kSequential);

TEST(StepPlannerTest, SequentialDraftsEverythingThenVerifies) {
  Fixture f;
  Sequence* a = f.Add(v1::SPECULATION_METHOD_DRAFT);
  Sequence* b = f.Add(v1::SPECULATION_METHOD_DRAFT);
  PhasePlan p = PlanPhase(f.running, Options(false), kBoth);
  EXPECT_FALSE(p.pipelined);
  EXPECT_EQ(p.verify.sequences_size(), 0);
  ASSERT_EQ(p.draft.sequences_size(), 2);
  EXPECT_EQ(p.draft.sequences(0).num_draft_tokens(), 4u);
  EXPECT_EQ(p.draft.sequences(0).start_position(), 0u);
  EXPECT_EQ(p.draft.sequences(0).tokens_size(), 8);  // Whole prompt: nothing cached yet.

  GiveDraftProposals(a, 4);
  GiveDraftProposals(b, 4);
  p = PlanPhase(f.running, Options(false), kBoth);
  EXPECT_EQ(p.draft.sequences_size(), 0);
  ASSERT_EQ(p.verify.sequences_size(), 2);
  EXPECT_EQ(p.verify.sequences(0).proposals_size(), 4);
  EXPECT_EQ(p.verify.sequences(0).tokens_size(), 8);
  EXPECT_EQ(p.verify_proposed, (std::vector<int>{4, 4}));
}

TEST(StepPlannerTest, PingPongAlternatesHalves) {
  Fixture f;
  for (int i = 0; i < 4; ++i) f.Add(v1::SPECULATION_METHOD_DRAFT);
  // Nothing ready: draft only half, so the other half has a phase to be drafted in.
  PhasePlan p = PlanPhase(f.running, Options(true), kExpensiveDraft);
  EXPECT_TRUE(p.pipelined);
  EXPECT_TRUE(p.ping_pong);
  EXPECT_EQ(p.mode, PipelineMode::kPingPong);
  EXPECT_EQ(p.verify.sequences_size(), 0);
  ASSERT_EQ(p.draft.sequences_size(), 2);
  GiveDraftProposals(p.draft_sequences[0], 4);
  GiveDraftProposals(p.draft_sequences[1], 4);
  // Now the drafted half is verified while the other half is drafted.
  p = PlanPhase(f.running, Options(true), kExpensiveDraft);
  ASSERT_EQ(p.verify.sequences_size(), 2);
  ASSERT_EQ(p.draft.sequences_size(), 2);
  for (Sequence* v : p.verify_sequences) {
    for (Sequence* d : p.draft_sequences) EXPECT_NE(v, d);
  }
}

TEST(StepPlannerTest, NoPredictedGainRunsSequentialStepsWhilePipelining) {
  Fixture f;
  Sequence* a = f.Add(v1::SPECULATION_METHOD_DRAFT);
  Sequence* b = f.Add(v1::SPECULATION_METHOD_DRAFT);
  Sequence* plain = f.Add(v1::SPECULATION_METHOD_NONE);
  GiveDraftProposals(a, 4);
  PhasePlan p = PlanPhase(f.running, Options(true, true), kNoGain);
  EXPECT_TRUE(p.pipelined);
  EXPECT_EQ(p.mode, PipelineMode::kSequential);
  // b is drafted first; nobody is verified meanwhile (lockstep would verify `plain`).
  EXPECT_EQ(p.verify.sequences_size(), 0);
  ASSERT_EQ(p.draft.sequences_size(), 1);
  EXPECT_EQ(p.draft_sequences[0], b);
  GiveDraftProposals(b, 4);
  // All verified together, and no continuation is drafted during the verify.
  p = PlanPhase(f.running, Options(true, true), kNoGain);
  EXPECT_EQ(p.verify.sequences_size(), 3);
  EXPECT_EQ(p.draft.sequences_size(), 0);
  (void)plain;
}

TEST(StepPlannerTest, PingPongNeedsTwoSequences) {
  Fixture f;
  GiveDraftProposals(f.Add(v1::SPECULATION_METHOD_DRAFT), 3);
  PhasePlan p = PlanPhase(f.running, Options(true, true), kExpensiveDraft);
  EXPECT_EQ(p.mode, PipelineMode::kLockstep);
  EXPECT_FALSE(p.ping_pong);
  p = PlanPhase(f.running, Options(false, true), kExpensiveDraft);
  EXPECT_EQ(p.mode, PipelineMode::kSequential);
}

TEST(StepPlannerTest, PingPongSplitsWhenEverythingIsReady) {
  Fixture f;
  for (int i = 0; i < 4; ++i) GiveDraftProposals(f.Add(v1::SPECULATION_METHOD_DRAFT), 3);
  PhasePlan p = PlanPhase(f.running, Options(true), kExpensiveDraft);
  EXPECT_EQ(p.verify.sequences_size(), 2);
  EXPECT_EQ(p.draft.sequences_size(), 0);
  EXPECT_EQ(p.cost_batch, 4);  // Priced at the running count when no peak is given.
  WorkerAvailability peak = kExpensiveDraft;
  peak.cost_batch = 6;
  EXPECT_EQ(PlanPhase(f.running, Options(true), peak).cost_batch, 6);
}

TEST(StepPlannerTest, CheapDraftKeepsEveryoneInLockstepWithContinuations) {
  Fixture f;
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 4; ++i) seqs.push_back(f.Add(v1::SPECULATION_METHOD_DRAFT));
  // Nobody has proposals: one draft phase for all (no half split).
  PhasePlan p = PlanPhase(f.running, Options(true, true), kCheapDraft);
  EXPECT_FALSE(p.ping_pong);
  EXPECT_EQ(p.verify.sequences_size(), 0);
  EXPECT_EQ(p.draft.sequences_size(), 4);
  for (Sequence* s : seqs) GiveDraftProposals(s, 3);
  // Everyone is verified together while the draft continues each of them.
  p = PlanPhase(f.running, Options(true, true), kCheapDraft);
  EXPECT_EQ(p.verify.sequences_size(), 4);
  ASSERT_EQ(p.draft.sequences_size(), 4);
  for (bool c : p.draft_is_continuation) EXPECT_TRUE(c);
  // One sequence's continuation missed: it is verified plain with the others while the
  // draft pre-drafts its next step (the guess of the target's token and K more).
  seqs[2]->candidates.Clear();
  p = PlanPhase(f.running, Options(true, true), kCheapDraft);
  ASSERT_EQ(p.verify.sequences_size(), 4);
  EXPECT_EQ(p.verify_sequences[3], seqs[2]);
  EXPECT_EQ(p.verify.sequences(3).proposals_size(), 0);
  EXPECT_STREQ(seqs[2]->planned_step().off_reason, "predrafting");
  ASSERT_EQ(p.draft.sequences_size(), 4);
  EXPECT_EQ(p.draft_sequences[3], seqs[2]);
  EXPECT_TRUE(p.draft_is_continuation[3]);
  EXPECT_EQ(p.draft.sequences(3).num_draft_tokens(), 5u);
  // Without plain pre-drafts it is drafted alone before the next verify.
  PlannerOptions o = Options(true, true);
  o.predraft_plain_steps = false;
  p = PlanPhase(f.running, o, kCheapDraft);
  EXPECT_EQ(p.verify.sequences_size(), 0);
  ASSERT_EQ(p.draft.sequences_size(), 1);
  EXPECT_EQ(p.draft_sequences[0], seqs[2]);
}

TEST(StepPlannerTest, OptimisticContinuationDraftsPastTheProposals) {
  Fixture f;
  Sequence* s = f.Add(v1::SPECULATION_METHOD_DRAFT);
  GiveDraftProposals(s, 4);
  PhasePlan p = PlanPhase(f.running, Options(true, true), kBoth);
  ASSERT_EQ(p.verify.sequences_size(), 1);
  ASSERT_EQ(p.draft.sequences_size(), 1);
  EXPECT_TRUE(p.draft_is_continuation[0]);
  const v1::DraftSequence& d = p.draft.sequences(0);
  // The draft cache holds the 8 prompt tokens and d1..d3; d4 is fed now.
  EXPECT_EQ(d.start_position(), 11u);
  ASSERT_EQ(d.tokens_size(), 1);
  EXPECT_EQ(d.tokens(0), 103);
  EXPECT_EQ(d.num_draft_tokens(), 5u);  // A guess of the bonus token + K more.
}

TEST(StepPlannerTest, DraftDownFallsBack) {
  Fixture f;
  Sequence* draft_only = f.Add(v1::SPECULATION_METHOD_DRAFT);
  Sequence* automatic = f.Add(v1::SPECULATION_METHOD_AUTO, 8, 64, 3);
  PhasePlan p = PlanPhase(f.running, Options(true), Workers(false, true));
  EXPECT_EQ(p.draft.sequences_size(), 0);
  ASSERT_EQ(p.verify.sequences_size(), 2);
  EXPECT_EQ(p.verify.sequences(0).proposals_size(), 0);  // Target-only decoding.
  EXPECT_EQ(draft_only->stats().fallback_steps, 1);
  EXPECT_EQ(automatic->stats().fallback_steps, 1);
}

TEST(StepPlannerTest, PromptLookupProposesFromTheContext) {
  Fixture f;
  ValidatedRequest r;
  r.speculation.method = v1::SPECULATION_METHOD_PROMPT_LOOKUP;
  r.speculation.fixed_k = 3;
  std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 5, 6};  // "5 6" was followed by 7 8 9.
  std::unique_ptr<Sequence> s = testing::MakeSequence(1, r, prompt, 32);
  PhasePlan p = PlanPhase({s.get()}, Options(false), kBoth);
  ASSERT_EQ(p.verify.sequences_size(), 1);
  const v1::VerifySequence& v = p.verify.sequences(0);
  ASSERT_EQ(v.proposals_size(), 3);
  EXPECT_EQ(v.proposals(0).token(), 7);
  EXPECT_EQ(v.proposals(1).token(), 8);
  EXPECT_EQ(v.proposals(2).token(), 9);
  EXPECT_FLOAT_EQ(v.proposals(0).q_probs(0), 1.0f);  // Deterministic proposal.
}

// Prompt lookup with trees on: "5 6" was followed by 7 8 9 and, later, by 7 4 3.
TEST(StepPlannerTest, TreePromptLookupCarriesParentsAndRowsCountNodes) {
  ProposerConfig config;
  config.prompt_lookup_branches = 2;
  const ProposerRegistry trees(config);
  ValidatedRequest r;
  r.speculation.method = v1::SPECULATION_METHOD_PROMPT_LOOKUP;
  r.speculation.fixed_k = 3;
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 5, 6, 7, 4, 3, 5, 6};
  std::vector<std::unique_ptr<Sequence>> owned;
  for (uint64_t id : {1, 2}) {
    owned.push_back(testing::MakeSequence(id, r, prompt, 32));
    owned.back()->AttachProposers(trees.ChainFor(r.speculation.method));
    owned.back()->target_cached = static_cast<int>(prompt.size()) - 1;
  }
  PlannerOptions o = Options(false);
  o.target_max_batch_tokens = 10;  // 1 fed token + 5 nodes each: one sequence fits.
  PhasePlan p = PlanPhase({owned[0].get(), owned[1].get()}, o, kBoth);
  ASSERT_EQ(p.verify.sequences_size(), 1);
  const v1::VerifySequence& v = p.verify.sequences(0);
  ASSERT_EQ(v.proposals_size(), 5);  // 7 4 3, then 8 9 under the shared 7.
  EXPECT_EQ(std::vector<int32_t>(v.proposal_parents().begin(), v.proposal_parents().end()),
            (std::vector<int32_t>{-1, 0, 1, 0, 3}));
  EXPECT_EQ(p.verify_proposed, std::vector<int>{3});  // Acceptance counts the depth.
  EXPECT_TRUE(owned[1]->candidates.empty());          // Proposed afresh next phase.
}

TEST(StepPlannerTest, KIsBoundedByTokensLeftAndMethodNone) {
  ValidatedRequest r;
  r.speculation.method = v1::SPECULATION_METHOD_PROMPT_LOOKUP;
  r.speculation.fixed_k = 8;
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 5, 6};  // A match with 3 followers.
  auto nearly_done = testing::MakeSequence(1, r, prompt, /*max_new_tokens=*/2);
  auto roomy = testing::MakeSequence(2, r, prompt, 64);
  r.speculation.method = v1::SPECULATION_METHOD_NONE;
  r.speculation.fixed_k.reset();
  auto none = testing::MakeSequence(3, r, prompt, 64);
  PhasePlan p = PlanPhase({nearly_done.get(), roomy.get(), none.get()}, Options(false), kBoth);
  ASSERT_EQ(p.verify.sequences_size(), 3);
  EXPECT_EQ(p.verify.sequences(0).proposals_size(), 1);  // 2 tokens left -> K = 1.
  EXPECT_EQ(p.verify.sequences(1).proposals_size(), 5);  // 7 8 9 5 6 follow "5 6".
  EXPECT_EQ(p.verify.sequences(2).proposals_size(), 0);
}

TEST(StepPlannerTest, LongPromptsArePrefilledInChunks) {
  Fixture f;
  Sequence* s = f.Add(v1::SPECULATION_METHOD_NONE, /*prompt_len=*/700, 64, std::nullopt);
  PlannerOptions o = Options(false);
  o.prefill_chunk = 256;
  PhasePlan p = PlanPhase(f.running, o, kBoth);
  EXPECT_EQ(p.verify.sequences_size(), 0);
  ASSERT_EQ(p.target_prefill.sequences_size(), 1);
  EXPECT_EQ(p.target_prefill.sequences(0).tokens_size(), 256);
  s->target_cached = 512;  // Two chunks done: 188 left, which a verify carries.
  p = PlanPhase(f.running, o, kBoth);
  EXPECT_EQ(p.target_prefill.sequences_size(), 0);
  ASSERT_EQ(p.verify.sequences_size(), 1);
  EXPECT_EQ(p.verify.sequences(0).start_position(), 512u);
  EXPECT_EQ(p.verify.sequences(0).tokens_size(), 188);
}

TEST(StepPlannerTest, VerifyRowsStayWithinTheTargetBudget) {
  Fixture f;
  for (int i = 0; i < 5; ++i) f.Add(v1::SPECULATION_METHOD_NONE, 8, 64, std::nullopt);
  PlannerOptions o = Options(false);
  o.target_max_batch_tokens = 20;  // 8 rows each: two fit.
  PhasePlan p = PlanPhase(f.running, o, kBoth);
  EXPECT_EQ(p.verify.sequences_size(), 2);
}

TEST(StepPlannerTest, LockstepVerifiesNonDraftSequencesDuringTheDraftPhase) {
  Fixture f;
  Sequence* drafting = f.Add(v1::SPECULATION_METHOD_DRAFT);
  Sequence* plain = f.Add(v1::SPECULATION_METHOD_NONE, 8, 64, std::nullopt);
  Sequence* waiting = f.Add(v1::SPECULATION_METHOD_DRAFT);
  GiveDraftProposals(waiting, 2);  // Already drafted: waits for the others (lockstep).
  PlannerOptions o = Options(true, true);
  o.predraft_plain_steps = false;
  PhasePlan p = PlanPhase(f.running, o, kCheapDraft);
  ASSERT_EQ(p.draft.sequences_size(), 1);
  EXPECT_EQ(p.draft_sequences[0], drafting);
  ASSERT_EQ(p.verify.sequences_size(), 1);
  EXPECT_EQ(p.verify_sequences[0], plain);
  // With plain pre-drafts nobody waits: `waiting` is verified with its continuation,
  // `drafting` plain with its next step pre-drafted.
  p = PlanPhase(f.running, Options(true, true), kCheapDraft);
  ASSERT_EQ(p.verify.sequences_size(), 3);
  EXPECT_EQ(p.verify_sequences[2], drafting);
  ASSERT_EQ(p.draft.sequences_size(), 2);
  EXPECT_EQ(p.draft_sequences[0], waiting);
  EXPECT_EQ(p.draft_sequences[1], drafting);
  EXPECT_TRUE(p.draft_is_continuation[0] && p.draft_is_continuation[1]);
  // Without pipelining the draft phase is a draft phase only.
  p = PlanPhase(f.running, Options(false), kCheapDraft);
  EXPECT_EQ(p.verify.sequences_size(), 0);
}

TEST(StepPlannerTest, RequestCanTurnPipeliningOff) {
  Fixture f;
  for (int i = 0; i < 4; ++i) f.Add(v1::SPECULATION_METHOD_DRAFT);
  ValidatedRequest off;
  off.speculation.method = v1::SPECULATION_METHOD_DRAFT;
  off.speculation.fixed_k = 4;
  off.speculation.pipelining = v1::PIPELINING_OFF;
  auto s = testing::MakeSequence(99, off, {1, 2, 3}, 16);
  f.running.push_back(s.get());
  PhasePlan p = PlanPhase(f.running, Options(true), kBoth);
  EXPECT_FALSE(p.pipelined);
  EXPECT_EQ(p.draft.sequences_size(), 5);  // Sequential: everyone is drafted first.
}

TEST(StepPlannerTest, AFarBehindDraftIsFedWhileTheSequenceDecodesPlain) {
  Fixture f;
  // 100 committed tokens the draft has never seen (a prompt, or tokens committed while
  // the draft was off): the sequence is verified plain and the draft prefilled meanwhile.
  Sequence* s = f.Add(v1::SPECULATION_METHOD_DRAFT, /*prompt_len=*/100);
  PlannerOptions o = Options(true);
  o.catch_up_min_tokens = 16;
  PhasePlan p = PlanPhase(f.running, o, kCheapDraft);
  ASSERT_EQ(p.verify.sequences_size(), 1);
  EXPECT_EQ(p.verify.sequences(0).proposals_size(), 0);
  EXPECT_EQ(p.draft.sequences_size(), 0);
  ASSERT_EQ(p.draft_prefill.sequences_size(), 1);
  EXPECT_EQ(p.draft_prefill.sequences(0).start_position(), 0u);
  EXPECT_EQ(p.draft_prefill.sequences(0).tokens_size(), 99);  // The last token waits.
  EXPECT_STREQ(s->planned_step().off_reason, "draft_catch_up");
  // Once fed, it drafts, feeding only the last token.
  const int slot = 0;
  s->proposer(slot).OnPrefilled(*s, s->proposer_state(slot), p.draft_prefill.sequences(0));
  p = PlanPhase(f.running, o, kCheapDraft);
  ASSERT_EQ(p.draft.sequences_size(), 1);
  EXPECT_EQ(p.draft.sequences(0).start_position(), 99u);
  EXPECT_EQ(p.draft.sequences(0).tokens_size(), 1);
  // A short lag is fed inline by the draft call.
  Sequence* short_prompt = f.Add(v1::SPECULATION_METHOD_DRAFT, /*prompt_len=*/16);
  p = PlanPhase({short_prompt}, o, kCheapDraft);
  ASSERT_EQ(p.draft.sequences_size(), 1);
  EXPECT_EQ(p.draft.sequences(0).tokens_size(), 16);
  EXPECT_EQ(p.draft_prefill.sequences_size(), 0);
}

// In a batch, a catch-up feed is cut to what one target step hides
// (HiddenDraftFeedTokens, tested in draft_feed_budget_test); alone, it is whole (above).
TEST(StepPlannerTest, ACatchUpFeedFitsUnderTheTargetStepOfABatch) {
  Fixture f;
  f.Add(v1::SPECULATION_METHOD_DRAFT, /*prompt_len=*/100);
  for (int i = 0; i < 3; ++i) f.Add(v1::SPECULATION_METHOD_NONE);
  PlannerOptions o = Options(true);
  o.catch_up_min_tokens = 16;
  WorkerAvailability w = kCheapDraft;
  w.draft_worker_feed_cost = 0.16;  // At n = 4: 25 tokens cost one plain target step.
  const PhasePlan p = PlanPhase(f.running, o, w);
  EXPECT_EQ(p.verify.sequences_size(), 4);
  ASSERT_EQ(p.draft_prefill.sequences_size(), 1);
  EXPECT_EQ(p.draft_prefill.sequences(0).tokens_size(), 25);
}

TEST(StepPlannerTest, NothingWhenTargetIsDown) {
  Fixture f;
  f.Add(v1::SPECULATION_METHOD_NONE);
  EXPECT_TRUE(PlanPhase(f.running, Options(true), Workers(true, false)).empty());
}

}  // namespace
}  // namespace tandem::coordinator
