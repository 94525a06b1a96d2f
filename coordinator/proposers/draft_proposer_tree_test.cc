// Draft-model trees from the draft proposer: leaf siblings for greedy and coupled
// requests within the node budget, priced by the verify cost, and pre-drafted as path
// outcomes.
#include <gtest/gtest.h>

#include "coordinator/proposers/draft_proposer_test_fixture.h"

namespace tandem::coordinator {
namespace {

TEST_F(DraftProposerTest, TreeSiblingsForGreedyAndCoupledWithinTheNodeBudget) {
  struct Case {
    float temperature;
    v1::AcceptanceRule rule;
    int max_k;
    std::vector<int32_t> tokens;
    std::vector<int32_t> parents;
  };
  const Case cases[] = {
      {0, v1::ACCEPTANCE_RULE_REJECTION, 8, {21, 22, 23, 121, 122, 123}, {-1, 0, 1, -1, 0, 1}},
      {0.8f, v1::ACCEPTANCE_RULE_COUPLED, 8, {21, 22, 23, 121, 122, 123}, {-1, 0, 1, -1, 0, 1}},
      {0, v1::ACCEPTANCE_RULE_REJECTION, 4, {21, 22, 23, 121}, {-1, 0, 1, -1}},
      {0.8f, v1::ACCEPTANCE_RULE_REJECTION, 8, {21, 22, 23}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.tokens));
    auto s = Make(8, 100, c.temperature, c.rule);
    const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
    PlannerOptions o;
    o.draft_tree_siblings = 1;
    o.max_k = c.max_k;
    DraftBudget budget{0, 512};
    PhasePlan plan;
    draft_.AddWork(s.get(), s->proposer_state(slot), slot, 3, false, o, &budget, &plan);
    ASSERT_EQ(plan.draft.sequences_size(), 1);
    EXPECT_EQ(plan.draft.sequences(0).num_top(), 4u);
    const std::optional<Candidates> got = draft_.OnDrafted(
        *s, s->proposer_state(slot), plan.draft.sequences(0), DraftedWithTop({21, 22, 23}), false);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(TokenIds(*got), c.tokens);
    EXPECT_EQ(got->parents, c.parents);
    EXPECT_EQ(got->depth(), 3);
  }
}

TEST_F(DraftProposerTest, TreeSiblingsOnlyWhereTheirValuePaysForTheirRow) {
  // Chain 21 22 23 with top tokens (t 0.6, t+100 0.3, t+200 0.1): a leaf beside d_{j+1}
  // is worth P(j, t) = 0.6^j p(t): 121 0.3, 122 0.18, 123 0.108, 221 0.1, 222 0.06, ...
  // A fixed-K request's step counts at rate 1, so a node needs P(j, t) > nu(K+1) - nu(K).
  struct Case {
    double slope;  // nu(K) = 1 + slope K.
    int siblings;
    std::vector<int32_t> tokens;
    std::vector<int32_t> parents;
  };
  const Case cases[] = {
      {0.5, 2, {21, 22, 23}, {}},  // No leaf pays: a chain.
      {0.15, 2, {21, 22, 23, 121, 122}, {-1, 0, 1, -1, 0}},
      {0.0, 2, {21, 22, 23, 121, 122, 123, 221, 222}, {-1, 0, 1, -1, 0, 1, -1, 0}},  // 8 nodes.
      {0.0, 1, {21, 22, 23, 121, 122, 123}, {-1, 0, 1, -1, 0, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.tokens));
    auto s = Make(8, 100);
    const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
    PlannerOptions o;
    o.draft_tree_siblings = c.siblings;
    o.max_k = 8;
    DraftBudget budget{0, 512};
    PhasePlan plan;
    plan.verify_cost = spec::LinearVerifyCost(c.slope);
    draft_.AddWork(s.get(), s->proposer_state(slot), slot, 3, false, o, &budget, &plan);
    ASSERT_EQ(plan.draft.sequences_size(), 1);
    const std::optional<Candidates> got = draft_.OnDrafted(
        *s, s->proposer_state(slot), plan.draft.sequences(0), DraftedWithTop({21, 22, 23}), false);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(TokenIds(*got), c.tokens);
    EXPECT_EQ(got->parents, c.parents);
  }
}

// With a tree, outcomes are ranked over its chain, and an outcome whose token is a leaf
// sibling becomes a path outcome: the branch feeds the leaf after d_1..d_j and guesses
// the bonus token, and it hits when the verify accepts that path and emits the guess.
TEST_F(DraftProposerTest, TreeLeavesArePreDraftedAsPathOutcomes) {
  auto s = Make(8, 100);
  const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
  PlannerOptions o;
  o.draft_tree_siblings = 1;
  o.predraft_branches = 3;
  DraftBudget budget{0, 512};
  PhasePlan plan;
  plan.verify_cost = spec::LinearVerifyCost(0.2);  // Only 121 (0.3) pays for its row.
  draft_.AddWork(s.get(), s->proposer_state(slot), slot, 3, false, o, &budget, &plan);
  s->candidates = *draft_.OnDrafted(*s, s->proposer_state(slot), plan.draft.sequences(0),
                                    DraftedWithTop({21, 22, 23}), false);
  ASSERT_EQ(s->candidates.parents, (std::vector<int32_t>{-1, 0, 1, -1}));
  PhasePlan next;
  next.verify_cost = plan.verify_cost;
  DraftBudget next_budget{0, 512};
  draft_.AddContinuation(s.get(), s->proposer_state(slot), slot, /*next_k=*/2, o, &next_budget,
                         &next);
  // (0, 121) 0.3 is the leaf: fed at 8 with 3 tokens (guess + 2); (1, 122) 0.18 is a
  // rejection; the whole chain 0.6^3 * 0.6 = 0.13.
  ASSERT_EQ(next.draft.sequences_size(), 3);
  const uint32_t starts[] = {8, 9, 10}, ks[] = {3, 2, 3};
  const int32_t fed[] = {121, 122, 23};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(next.draft.sequences(i).start_position(), starts[i]);
    EXPECT_EQ(next.draft.sequences(i).tokens(0), fed[i]);
    EXPECT_EQ(next.draft.sequences(i).num_draft_tokens(), ks[i]);
    const std::vector<int32_t> drafted = {40 + i, 50 + i, 60 + i};
    draft_.OnDrafted(*s, s->proposer_state(slot), next.draft.sequences(i),
                     DraftedWithTop({drafted.begin(), drafted.begin() + ks[i]}), true);
  }
  // The target takes the leaf 121 and emits 40, the leaf branch's guess: a hit whose
  // next candidates are the branch's proposals after the guess.
  s->OnVerified(Verified({121, 40}, 1), 4, absl::Now());
  ASSERT_GE(s->candidates.size(), 2);
  EXPECT_TRUE(s->candidates.predrafted);
  EXPECT_EQ(s->candidates.tokens[0].token(), 50);
  EXPECT_EQ(s->candidates.tokens[1].token(), 60);
  std::vector<int32_t> cache = s->tokens();
  cache.push_back(50);
  EXPECT_EQ(Cache(*s), cache);
}

}  // namespace
}  // namespace tandem::coordinator
