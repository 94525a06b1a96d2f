// The draft proposer: its mirror of the draft worker's cache, the work it adds to a
// phase (what it feeds, prefill chunks within the budget, K caps), continuations and
// their use only when the guess holds.
#include "coordinator/proposers/draft_proposer.h"

#include <gtest/gtest.h>

#include "coordinator/proposers/draft_proposer_test_fixture.h"

namespace tandem::coordinator {
namespace {

TEST_F(DraftProposerTest, MirrorsTheDraftCacheAndFeedsOnlyWhatItLacks) {
  auto s = Make(8, 100);
  GiveDraftCandidates(s.get(), {11, 12, 13});  // Feeds the prompt and 11, 12 (13 is not fed).
  EXPECT_EQ(Cache(*s).size(), 8u + 2);
  EXPECT_EQ(s->candidates.size(), 3);
  EXPECT_EQ(s->candidates.site, ProposerSite::kDraftWorker);
  // The target accepts 11, then corrects with 99: the draft holds prompt + 11 validly.
  s->OnVerified(Verified({11, 99}, 1), 3, absl::Now());
  PlannerOptions o;
  DraftBudget budget{0, 512};
  PhasePlan plan;
  const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
  draft_.AddWork(s.get(), s->proposer_state(slot), slot, 4, false, o, &budget, &plan);
  ASSERT_EQ(plan.draft.sequences_size(), 1);
  EXPECT_EQ(plan.draft.sequences(0).start_position(), 9u);  // Prompt + 11 are cached.
  ASSERT_EQ(plan.draft.sequences(0).tokens_size(), 1);
  EXPECT_EQ(plan.draft.sequences(0).tokens(0), 99);
  EXPECT_EQ(plan.draft_slots, std::vector<int>{slot});
}

TEST_F(DraftProposerTest, LongPromptsArePrefilledWithinThePhaseBudget) {
  PlannerOptions o;
  o.prefill_chunk = 256;
  DraftBudget budget{0, 400};
  PhasePlan plan;
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 3; ++i) {
    seqs.push_back(Make(1500, 10));
    Sequence* s = seqs.back().get();
    const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
    draft_.AddWork(s, s->proposer_state(slot), slot, 4, false, o, &budget, &plan);
  }
  // 256 + 144, then nothing: the third waits for the next phase.
  ASSERT_EQ(plan.draft_prefill.sequences_size(), 2);
  EXPECT_EQ(plan.draft_prefill.sequences(0).tokens_size(), 256);
  EXPECT_EQ(plan.draft_prefill.sequences(1).tokens_size(), 144);
  EXPECT_EQ(plan.draft.sequences_size(), 0);
}

TEST_F(DraftProposerTest, ContinuationIsCappedAndUsedOnlyWhenTheGuessHolds) {
  const std::vector<int> body = {21, 22, 23, 24, 25};
  for (bool guess_right : {true, false}) {
    auto s = Make(8, 100);
    GiveDraftCandidates(s.get(), {body[0], body[1]});
    const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
    PlannerOptions o;
    DraftBudget budget{0, 512};
    PhasePlan plan;
    draft_.AddContinuation(s.get(), s->proposer_state(slot), slot, /*next_k=*/2, o, &budget, &plan);
    ASSERT_EQ(plan.draft.sequences_size(), 1);
    EXPECT_TRUE(plan.draft_is_continuation[0]);
    EXPECT_EQ(plan.draft.sequences(0).start_position(), 9u);    // Prompt + body[0] cached.
    EXPECT_EQ(plan.draft.sequences(0).num_draft_tokens(), 3u);  // Bonus guess + K more.
    v1::DraftedSequence answer;
    for (int t : {guess_right ? body[2] : body[2] + 1, body[3], body[4]}) {
      *answer.add_proposals() = PointMassProposal(t);
    }
    EXPECT_FALSE(draft_
                     .OnDrafted(*s, s->proposer_state(slot), plan.draft.sequences(0), answer,
                                /*continuation=*/true)
                     .has_value());
    // Both candidates accepted, bonus body[2].
    s->OnVerified(Verified({body[0], body[1], body[2]}, 2), 2, absl::Now());
    EXPECT_EQ(s->candidates.empty(), !guess_right);
    if (guess_right) {
      ASSERT_EQ(s->candidates.size(), 2);
      EXPECT_EQ(s->candidates.tokens[0].token(), body[3]);
      EXPECT_EQ(s->candidates.tokens[1].token(), body[4]);
    }
  }
}

TEST_F(DraftProposerTest, ContinuationStopsAtTheContextAndTheTokensLeft) {
  // Prompt 8 + 2 candidates: the continuation starts at position 9 and proposes `more`
  // tokens, so a Draft call needs 9 + 1 + more <= context, and after a full accept
  // (3 tokens) more - 1 candidates are useful only up to remaining - 3 - 1... i.e.
  // more <= remaining - k - 1.
  const auto more_for = [&](int context, int max_new, int next_k = 2) -> int {
    PlannerOptions o;
    o.context_length = context;
    auto s = Make(8, max_new);
    GiveDraftCandidates(s.get(), {30, 31});
    const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
    DraftBudget budget{0, 512};
    PhasePlan plan;
    draft_.AddContinuation(s.get(), s->proposer_state(slot), slot, next_k, o, &budget, &plan);
    return plan.draft.sequences_size() == 0 ? 0 : plan.draft.sequences(0).num_draft_tokens();
  };
  EXPECT_EQ(more_for(2048, 100), 3);     // next K + 1.
  EXPECT_EQ(more_for(2048, 100, 5), 6);  // The next step's K, not this one's.
  EXPECT_EQ(more_for(2048, 100, 0), 0);  // Speculation off next: nothing to draft.
  EXPECT_EQ(more_for(14, 100), 3);       // 9 + 1 + 3 < 14.
  EXPECT_EQ(more_for(12, 100), 2);       // 9 + 1 + 2 = 12.
  EXPECT_EQ(more_for(11, 100), 0);       // One would only guess the bonus: none.
  EXPECT_EQ(more_for(2048, 5), 2);       // 5 - 2 - 1.
  EXPECT_EQ(more_for(2048, 4), 0);
}

// The speculation cache: with top tokens d_i (0.6), a_i (0.3), b_i (0.1) at each of the
// three proposals, the three likeliest outcomes are (0, a_1) 0.3, (1, a_2) 0.18 and all
// accepted 0.6^4 = 0.13; each is drafted on a branch forked from the sequence's draft id
// at its prefix. The verify's outcome (1, a_2) hits: its branch becomes the draft's
// cache (and id) and its proposals the next candidates; the next branches fork from it.
TEST_F(DraftProposerTest, BranchesForkAtTheirOutcomeAndAHitBecomesTheCache) {
  auto s = Make(8, 100);
  const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
  const uint64_t id = s->id();
  const auto branch_id = [&](int b) { return id | (uint64_t(b) << 48); };
  v1::DraftSequence first;
  first.set_sequence_id(id);
  first.mutable_tokens()->Add(s->tokens().begin(), s->tokens().end());
  first.set_num_draft_tokens(3);
  s->candidates =
      *draft_.OnDrafted(*s, s->proposer_state(slot), first, DraftedWithTop({21, 22, 23}), false);
  PlannerOptions o;
  o.predraft_branches = 3;
  DraftBudget budget{0, 512};
  PhasePlan plan;
  draft_.AddContinuation(s.get(), s->proposer_state(slot), slot, /*next_k=*/2, o, &budget, &plan);
  ASSERT_EQ(plan.draft.sequences_size(), 3);
  struct Want {
    int slot;
    uint32_t start;
    int32_t fed;
    uint32_t k;
  };
  const Want want[] = {{1, 8, 121, 2}, {2, 9, 122, 2}, {3, 10, 23, 3}};
  for (int i = 0; i < 3; ++i) {
    const v1::DraftSequence& e = plan.draft.sequences(i);
    SCOPED_TRACE(i);
    EXPECT_EQ(e.sequence_id(), branch_id(want[i].slot));
    EXPECT_EQ(e.fork_from(), id);
    EXPECT_EQ(e.start_position(), want[i].start);
    ASSERT_EQ(e.tokens_size(), 1);
    EXPECT_EQ(e.tokens(0), want[i].fed);
    EXPECT_EQ(e.num_draft_tokens(), want[i].k);
    EXPECT_EQ(e.num_top(), 4u);
    EXPECT_TRUE(plan.draft_is_continuation[i]);
  }
  EXPECT_EQ(budget.rows, 3);
  for (int i = 0; i < 3; ++i) {
    const std::vector<int32_t> tokens =
        i == 2 ? std::vector<int32_t>{24, 25, 26} : std::vector<int32_t>{40 + i, 50 + i};
    EXPECT_FALSE(draft_
                     .OnDrafted(*s, s->proposer_state(slot), plan.draft.sequences(i),
                                DraftedWithTop(tokens), true)
                     .has_value());
  }
  s->OnVerified(Verified({21, 122}, 1), 3, absl::Now());
  ASSERT_EQ(s->candidates.size(), 2);
  EXPECT_EQ(s->candidates.tokens[0].token(), 41);
  EXPECT_EQ(s->candidates.tokens[1].token(), 51);
  std::vector<int32_t> cache = s->tokens();
  cache.push_back(41);
  EXPECT_EQ(Cache(*s), cache);
  // The next step's branches fork from branch 2 and use slots 0, 1, 3.
  PhasePlan next;
  DraftBudget next_budget{0, 512};
  draft_.AddContinuation(s.get(), s->proposer_state(slot), slot, 2, o, &next_budget, &next);
  ASSERT_EQ(next.draft.sequences_size(), 3);
  EXPECT_EQ(next.draft.sequences(0).sequence_id(), id);
  EXPECT_EQ(next.draft.sequences(1).sequence_id(), branch_id(1));
  EXPECT_EQ(next.draft.sequences(2).sequence_id(), branch_id(3));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(next.draft.sequences(i).fork_from(), branch_id(2));
  std::vector<uint64_t> ids;
  draft_.AppendWorkerIds(*s, s->proposer_state(slot), &ids);
  EXPECT_EQ(ids, (std::vector<uint64_t>{branch_id(1), branch_id(2), branch_id(3)}));
  // A miss (none of the outcomes) leaves no candidates and drops every branch.
  s->OnVerified(Verified({999}, 0), 2, absl::Now());
  EXPECT_TRUE(s->candidates.empty());
}

// The fan-out budget: beyond its likeliest outcome a sequence pre-drafts only the
// tokens the phase's budget has left (what the draft can do while the target verifies).
TEST_F(DraftProposerTest, BranchesBeyondTheLikeliestStayWithinTheTokenBudget) {
  for (int left : {-1, 0, 2, 3, 5}) {
    SCOPED_TRACE(left);
    auto s = Make(8, 100);
    const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
    v1::DraftSequence first;
    first.set_sequence_id(s->id());
    first.mutable_tokens()->Add(s->tokens().begin(), s->tokens().end());
    first.set_num_draft_tokens(3);
    s->candidates =
        *draft_.OnDrafted(*s, s->proposer_state(slot), first, DraftedWithTop({21, 22, 23}), false);
    PlannerOptions o;
    o.predraft_branches = 4;
    DraftBudget budget{0, 512, left};
    PhasePlan plan;
    draft_.AddContinuation(s.get(), s->proposer_state(slot), slot, 2, o, &budget, &plan);
    // Each outcome after the first costs 2 tokens (next K), the all-accepted one 3.
    const int want = left < 0 ? 4 : left < 2 ? 1 : left < 4 ? 2 : 3;
    EXPECT_EQ(plan.draft.sequences_size(), want);
  }
}

// A plain step's pre-draft: the main id is fed what the draft lacks and drafts a guess of
// the target's token plus next K; the step hits when the target commits the guess (the
// rest are the next candidates) and misses otherwise, leaving the cache as the worker
// holds it so that the next call feeds from the divergence.
TEST_F(DraftProposerTest, PlainStepsArePredraftedOnTheMainIdAndHitOnTheGuess) {
  auto s = Make(8, 100);
  const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
  PlannerOptions o;
  GiveDraftCandidates(s.get(), {21, 22, 23});
  s->OnVerified(Verified({50}, 0), 3, absl::Now());  // Rejected at once: 50 committed.
  ASSERT_TRUE(s->candidates.empty());
  ASSERT_TRUE(draft_.PredraftsPlainSteps(*s, 2, o));
  const auto predraft = [&](std::vector<int32_t> drafted) {
    DraftBudget budget{0, 512};
    PhasePlan plan;
    draft_.AddContinuation(s.get(), s->proposer_state(slot), slot, /*next_k=*/2, o, &budget, &plan);
    EXPECT_EQ(plan.draft.sequences_size(), 1);
    if (plan.draft.sequences_size() != 1) return v1::DraftSequence();
    EXPECT_TRUE(plan.draft_is_continuation[0]);
    EXPECT_EQ(budget.rows, plan.draft.sequences(0).tokens_size());
    EXPECT_FALSE(draft_
                     .OnDrafted(*s, s->proposer_state(slot), plan.draft.sequences(0),
                                DraftedWithTop(drafted), true)
                     .has_value());
    return plan.draft.sequences(0);
  };
  v1::DraftSequence e = predraft({60, 61, 62});
  EXPECT_EQ(e.sequence_id(), s->id());  // The main id: nothing to fork from.
  EXPECT_EQ(e.fork_from(), 0u);
  EXPECT_EQ(e.start_position(), 8u);  // The draft held d_1 = 21 where 50 now is.
  EXPECT_EQ(std::vector<int32_t>(e.tokens().begin(), e.tokens().end()), std::vector<int32_t>{50});
  EXPECT_EQ(e.num_draft_tokens(), 3u);               // The guess and next K.
  s->OnVerified(Verified({60}, 0), 0, absl::Now());  // The guess: a hit.
  EXPECT_EQ(TokenIds(s->candidates), (std::vector<int32_t>{61, 62}));
  EXPECT_TRUE(s->candidates.predrafted);
  std::vector<int32_t> cache = s->tokens();
  cache.push_back(61);
  EXPECT_EQ(Cache(*s), cache);
  // A miss: no candidates; the cache is what the worker holds (60 70 71 after 50).
  s->candidates.Clear();
  e = predraft({70, 71, 72});
  EXPECT_EQ(e.start_position(), 9u);
  s->OnVerified(Verified({99}, 0), 0, absl::Now());
  EXPECT_TRUE(s->candidates.empty());
  EXPECT_EQ(draft_.CatchUpTokens(*s, s->proposer_state(slot)), 0);
  EXPECT_EQ(Cache(*s).size(), s->tokens().size() + 1);
  EXPECT_EQ(Cache(*s)[s->tokens().size() - 1], 70);
  // Not for a tree the request sized, nor without room for the guess and a candidate.
  EXPECT_FALSE(draft_.PredraftsPlainSteps(*Make(8, 2), 1, o));
  auto sized = Make(8, 100);
  ValidatedRequest r = sized->request();
  r.speculation.draft_tree_nodes = 8;
  EXPECT_FALSE(draft_.PredraftsPlainSteps(*MakeSequence(2, r, {1, 2, 3}, 100), 2, o));
}

TEST_F(DraftProposerTest, UnusableReasons) {
  auto s = Make(8, 100);
  const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
  PlannerOptions o;
  const ProposerState& st = s->proposer_state(slot);
  EXPECT_EQ(draft_.Unusable(*s, st, Workers(true), o), nullptr);
  EXPECT_STREQ(draft_.Unusable(*s, st, Workers(false), o), "draft_down");
  s->skip_draft_once = true;
  EXPECT_STREQ(draft_.Unusable(*s, st, Workers(true), o), "draft_rejected");
  s->skip_draft_once = false;
  s->draft_allowed = false;
  EXPECT_STREQ(draft_.Unusable(*s, st, Workers(true), o), "draft_kv");
  s->draft_allowed = true;
  o.draft_context_length = 8;
  EXPECT_STREQ(draft_.Unusable(*s, st, Workers(true), o), "draft_context");
}

}  // namespace
}  // namespace tandem::coordinator
