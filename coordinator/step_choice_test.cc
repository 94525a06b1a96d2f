// Each sequence's proposer and K (ChooseSteps) on plain Sequence objects: fixed K within
// its caps, method none, the batch limit (at the planning batch), deferral, the lone
// drafter's shared wait or overlap, and the server tree budget's tree option.
#include "coordinator/step_choice.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <optional>
#include <string>

#include "coordinator/proposers/test_util.h"
#include "spec/cost_model.h"

namespace tandem::coordinator {
namespace {

std::unique_ptr<Sequence> Make(uint64_t id, v1::SpeculationMethod method, int max_new,
                               std::optional<int> fixed_k) {
  ValidatedRequest r;
  r.speculation.method = method;
  r.speculation.fixed_k = fixed_k;
  r.max_new_tokens = max_new;
  std::vector<int32_t> prompt(8);
  std::iota(prompt.begin(), prompt.end(), 10);
  return testing::MakeSequence(id, r, prompt, max_new);
}

WorkerAvailability BothWorkers() {
  WorkerAvailability w;
  w.draft = true;
  w.target = true;
  return w;
}

TEST(StepChoiceTest, FixedKTakesTheFirstUsableEntryWithinItsCaps) {
  auto nearly_done = Make(1, v1::SPECULATION_METHOD_PROMPT_LOOKUP, 2, 8);
  auto roomy = Make(2, v1::SPECULATION_METHOD_PROMPT_LOOKUP, 64, 20);
  auto none = Make(3, v1::SPECULATION_METHOD_NONE, 64, std::nullopt);
  PlannerOptions o;
  const std::vector<StepChoice> c =
      ChooseSteps({nearly_done.get(), roomy.get(), none.get()}, o, BothWorkers(), true);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].slot, 0);
  EXPECT_EQ(c[0].k, 1);  // 2 tokens left: one proposal at most.
  EXPECT_EQ(c[1].slot, 0);
  EXPECT_EQ(c[1].k, o.max_k);  // K 20 capped by --max_k.
  EXPECT_EQ(c[2].slot, -1);
  EXPECT_EQ(c[2].k, 0);
  EXPECT_STREQ(none->planned_step().off_reason, "not_requested");
  EXPECT_EQ(nearly_done->planned_step().off_reason, nullptr);
}

TEST(StepChoiceTest, AdaptiveRequestsDoNotSpeculateAboveTheBatchLimit) {
  auto adaptive = Make(1, v1::SPECULATION_METHOD_PROMPT_LOOKUP, 64, std::nullopt);
  auto fixed = Make(2, v1::SPECULATION_METHOD_PROMPT_LOOKUP, 64, 3);
  PlannerOptions o;
  o.speculation_max_batch = 1;
  const std::vector<StepChoice> c =
      ChooseSteps({adaptive.get(), fixed.get()}, o, BothWorkers(), true);
  EXPECT_EQ(c[0].slot, -1);
  EXPECT_EQ(c[0].k, 0);
  EXPECT_STREQ(c[0].fallback, "batch_limit");
  EXPECT_STREQ(adaptive->planned_step().off_reason, "batch_limit");
  EXPECT_EQ(c[1].k, 3);  // A fixed K is the client's choice.
}

TEST(StepChoiceTest, TheBatchLimitAppliesToThePlanningBatch) {
  // One sequence running, but the recent peak (cost_batch) was two: a dip between
  // requests does not lift the limit.
  auto adaptive = Make(1, v1::SPECULATION_METHOD_PROMPT_LOOKUP, 64, std::nullopt);
  PlannerOptions o;
  o.speculation_max_batch = 1;
  WorkerAvailability w = BothWorkers();
  w.cost_batch = 2;
  std::vector<StepChoice> c = ChooseSteps({adaptive.get()}, o, w, true);
  EXPECT_STREQ(c[0].fallback, "batch_limit");
  w.cost_batch = 1;
  c = ChooseSteps({adaptive.get()}, o, w, true);
  EXPECT_EQ(c[0].fallback, nullptr);
}

TEST(StepChoiceTest, DeferChoiceMarksTheControllersChoiceDeferred) {
  auto s = Make(1, v1::SPECULATION_METHOD_PROMPT_LOOKUP, 64, std::nullopt);
  ChooseSteps({s.get()}, PlannerOptions(), BothWorkers(), true);
  EXPECT_FALSE(s->planned_step().choice.deferred);
  DeferChoice(*s, "candidates_pending");
  EXPECT_TRUE(s->planned_step().choice.deferred);
  EXPECT_STREQ(s->planned_step().off_reason, "candidates_pending");
}

// Costs under which drafting pays when the whole batch drafts (S about 1.37 at the
// prior's acceptance 0.6) but not for one sequence of four in a sequential phase: its
// draft phase holds up the other three, so it is charged o * 4 (S about 0.8).
TEST(StepChoiceTest, ALoneDrafterPaysWhatItsDraftCostsTheBatch) {
  WorkerAvailability w = BothWorkers();
  w.draft_worker_cost = 0.02;
  w.draft_worker_overhead = 0.4;
  w.verify_cost = spec::LinearVerifyCost(0.05);
  const std::optional<int> adaptive;
  const auto batch = [&](int drafters, std::vector<std::unique_ptr<Sequence>>* owned) {
    std::vector<Sequence*> running;
    for (int i = 0; i < 4; ++i) {
      owned->push_back(
          Make(i + 1, i < drafters ? v1::SPECULATION_METHOD_DRAFT : v1::SPECULATION_METHOD_NONE, 64,
               adaptive));
      running.push_back(owned->back().get());
    }
    return running;
  };
  {
    std::vector<std::unique_ptr<Sequence>> owned;
    const std::vector<Sequence*> running = batch(1, &owned);
    EXPECT_EQ(ChooseSteps(running, PlannerOptions(), w, /*sequential=*/true)[0].k, 0);
    EXPECT_EQ(running[0]->planned_step().off_reason, std::string("controller"));
  }
  {  // The whole batch drafts: o is shared by all four.
    std::vector<std::unique_ptr<Sequence>> owned;
    for (const StepChoice& c : ChooseSteps(batch(4, &owned), PlannerOptions(), w, true)) {
      EXPECT_GT(c.k, 0);
    }
  }
  {  // Not sequential (lockstep verifies the others meanwhile): nobody waits.
    std::vector<std::unique_ptr<Sequence>> owned;
    EXPECT_GT(ChooseSteps(batch(1, &owned), PlannerOptions(), w, false)[0].k, 0);
  }
  // Overlapped, but a verify runs 15 % slower next to the draft: a lone drafter would
  // slow all four steps (0.6 of a step, more than it gains); four drafters share it.
  w.draft_overlap_cost = 0.15;
  {
    std::vector<std::unique_ptr<Sequence>> owned;
    const std::vector<Sequence*> running = batch(1, &owned);
    EXPECT_EQ(ChooseSteps(running, PlannerOptions(), w, false)[0].k, 0);
    EXPECT_EQ(running[0]->planned_step().off_reason, std::string("controller"));
  }
  {
    std::vector<std::unique_ptr<Sequence>> owned;
    for (const StepChoice& c : ChooseSteps(batch(4, &owned), PlannerOptions(), w, false)) {
      EXPECT_GT(c.k, 0);
    }
  }
}

// The server's tree budget makes the draft's tree an option of its own: chosen where
// its acceptance pays for its draft cost, not where a tree call costs 40 chains.
TEST(StepChoiceTest, AServerTreeBudgetIsAnOptionWeighedAgainstTheChain) {
  spec::PositionAcceptance chains(8, 1.0), trees(8, 1.0);
  for (int i = 0; i < 50; ++i) {
    chains.Observe(8, i % 2 == 0 ? 0 : 8);  // Chains: half the first proposals rejected.
    trees.Observe(8, 8);                    // Trees: every path accepted.
  }
  PlannerOptions o;
  o.draft_tree_nodes = 16;
  WorkerAvailability w = BothWorkers();
  w.draft_worker_cost = 0.02;
  w.draft_worker_overhead = w.draft_worker_tree_overhead = 0.1;
  w.verify_cost = spec::LinearVerifyCost(0.05);
  const auto choose = [&](std::optional<int> fixed_k, double tree_factor) {
    auto s = Make(1, v1::SPECULATION_METHOD_DRAFT, 64, fixed_k);
    s->AttachProposers(testing::TestRegistry().ChainFor(v1::SPECULATION_METHOD_DRAFT),
                       {{&chains, &trees}});
    WorkerAvailability costs = w;
    costs.draft_worker_tree_factor = tree_factor;
    return ChooseSteps({s.get()}, o, costs, true)[0];
  };
  const StepChoice cheap = choose(std::nullopt, 1.0);
  EXPECT_EQ(cheap.slot, 0);
  EXPECT_TRUE(cheap.tree);
  EXPECT_GT(cheap.k, 3);
  const StepChoice dear = choose(std::nullopt, 40.0);
  EXPECT_EQ(dear.slot, 0);
  EXPECT_FALSE(dear.tree);
  EXPECT_GT(dear.k, 0);
  EXPECT_TRUE(choose(4, 40.0).tree);  // A fixed K takes the server's tree as it is.
  o.draft_tree_nodes = 0;             // No tree budget: no tree option.
  EXPECT_FALSE(choose(std::nullopt, 1.0).tree);
}

}  // namespace
}  // namespace tandem::coordinator
