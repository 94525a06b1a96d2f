// Dynamic draft trees from the draft proposer: asked for greedy and coupled requests
// with the server's node budget when the controller chose the tree option, or the
// request's budget always (within the workers' limits), pruned
// by value (a budget the request set is not), not pre-drafted, and the cache mirror holds only the
// committed tokens.
#include <gtest/gtest.h>

#include "coordinator/proposers/draft_proposer_test_fixture.h"

namespace tandem::coordinator {
namespace {

// A drafted tree: 21 (0.6) 22 (0.36, under 21) 121 (0.3, a root sibling) 23 (0.2).
v1::DraftedSequence DraftedTree() {
  v1::DraftedSequence d;
  const int32_t tokens[] = {21, 22, 121, 23};
  const int32_t parents[] = {-1, 0, -1, 1};
  const float paths[] = {0.6f, 0.36f, 0.3f, 0.2f};
  for (int i = 0; i < 4; ++i) {
    *d.add_proposals() = PointMassProposal(tokens[i]);
    d.add_proposal_parents(parents[i]);
    d.add_path_probs(paths[i]);
  }
  d.set_cached_length(8);
  return d;
}

TEST_F(DraftProposerTest, DynamicTreesAreAskedForPointMassRulesWithinTheBudget) {
  struct Case {
    float temperature;
    v1::AcceptanceRule rule;
    std::optional<int> request_nodes;
    int max_tree_nodes;
    bool tree_chosen;  // The controller's tree option (the server's budget).
    uint32_t nodes;    // Asked of the draft worker (0 = a chain).
    bool offers_choice;
  };
  const Case cases[] = {
      {0, v1::ACCEPTANCE_RULE_GREEDY, std::nullopt, 16, true, 12, true},
      {0, v1::ACCEPTANCE_RULE_GREEDY, std::nullopt, 16, false, 0, true},  // Chain chosen.
      {0.8f, v1::ACCEPTANCE_RULE_COUPLED, std::nullopt, 16, true, 12, true},
      {0.8f, v1::ACCEPTANCE_RULE_REJECTION, std::nullopt, 16, true, 0, false},
      {0, v1::ACCEPTANCE_RULE_GREEDY, 0, 16, true, 0, false},   // The request asks for a chain.
      {0, v1::ACCEPTANCE_RULE_GREEDY, 5, 16, false, 5, false},  // Sized by the request: always.
      {0, v1::ACCEPTANCE_RULE_GREEDY, std::nullopt, 10, true, 10, true},  // The verify's limit.
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.nodes);
    ValidatedRequest r;
    r.speculation.method = v1::SPECULATION_METHOD_DRAFT;
    r.speculation.fixed_k = 4;
    r.speculation.rule = c.rule;
    r.speculation.draft_tree_nodes = c.request_nodes;
    r.sampling.temperature = c.temperature;
    auto s = MakeSequence(1, r, {10, 11, 12, 13, 14, 15, 16, 17}, 100, tokenizer_.get());
    const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
    PlannerOptions o;
    o.draft_tree_nodes = 12;
    o.draft_tree_width = 3;
    o.max_tree_nodes = c.max_tree_nodes;
    o.predraft_branches = 3;
    DraftBudget budget{0, 512};
    PhasePlan plan;
    EXPECT_EQ(draft_.OffersTreeChoice(*s, o), c.offers_choice);
    draft_.AddWork(s.get(), s->proposer_state(slot), slot, 4, c.tree_chosen, o, &budget, &plan);
    ASSERT_EQ(plan.draft.sequences_size(), 1);
    const v1::DraftSequence& d = plan.draft.sequences(0);
    EXPECT_EQ(d.tree_nodes(), c.nodes);
    EXPECT_EQ(d.tree_width(), c.nodes > 0 ? 3u : 0u);
    EXPECT_EQ(d.num_top(), c.nodes > 0 ? 0u : 4u);  // Trees take no top tokens.
    EXPECT_EQ(d.num_draft_tokens(), 4u);
    EXPECT_EQ(budget.rows, 8);  // The prompt (a tree's passes feed 3 rows).
  }
}

TEST_F(DraftProposerTest, DynamicTreesArePrunedByValueAndNotPreDrafted) {
  struct Case {
    double slope;                      // nu(K) = 1 + slope K; a fixed-K step's rate is 1.
    std::optional<int> request_nodes;  // A budget the request set is used whole.
    std::vector<int32_t> tokens, parents;
  };
  const Case cases[] = {
      {0.5, std::nullopt, {21, 22}, {-1, 0}},  // K = 2 kept; 121 (0.3) does not pay.
      {0.25, std::nullopt, {21, 22, 121}, {-1, 0, -1}},
      {0.1, std::nullopt, {21, 22, 121, 23}, {-1, 0, -1, 1}},
      {0.5, 8, {21, 22, 121, 23}, {-1, 0, -1, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.slope);
    auto s = Make(8, 100);
    if (c.request_nodes.has_value()) {
      ValidatedRequest r = s->request();
      r.speculation.draft_tree_nodes = c.request_nodes;
      s = MakeSequence(1, r, s->tokens(), 100, tokenizer_.get());
    }
    const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
    PlannerOptions o;
    o.draft_tree_nodes = 8;
    o.predraft_branches = 3;
    DraftBudget budget{0, 512};
    PhasePlan plan;
    plan.verify_cost = spec::LinearVerifyCost(c.slope);
    draft_.AddWork(s.get(), s->proposer_state(slot), slot, 2, /*tree=*/true, o, &budget, &plan);
    ASSERT_EQ(plan.draft.sequences_size(), 1);
    std::optional<Candidates> got = draft_.OnDrafted(*s, s->proposer_state(slot),
                                                     plan.draft.sequences(0), DraftedTree(), false);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(TokenIds(*got), c.tokens);
    EXPECT_EQ(got->parents, c.parents);
    // The controller's tree option is evidence apart; a request-sized tree is the method's.
    EXPECT_EQ(got->tree_option, !c.request_nodes.has_value());
    EXPECT_EQ(Cache(*s), s->tokens());  // The draft keeps only the committed tokens.
    s->candidates = *std::move(got);
    PhasePlan next;
    DraftBudget next_budget{0, 512};
    draft_.AddContinuation(s.get(), s->proposer_state(slot), slot, 2, o, &next_budget, &next);
    EXPECT_EQ(next.draft.sequences_size(), 0);
  }
}

}  // namespace
}  // namespace tandem::coordinator
