// The speculation controller inside the engine, against fake workers
// (coordinator/fake_worker.h): its K reaches the planner (the verified proposals) and
// the per-request stats and metrics; it turns speculation off when the draft never
// agrees with the target; the batch limit and fixed K bypass it; a server tree budget
// is used where trees pay. Output stays
// identical to target-only decoding throughout.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "coordinator/engine_test_fixture.h"

namespace tandem::coordinator {
namespace {

using Result = EngineTestOutput;

// The shared engine fixture with strict worker batches and fixed cost terms (a draft
// token costs 0.1 step, nu(K) = 1 + 0.05 K, o = 0.05), so the controller's decisions do
// not depend on this machine's timing.
class EngineControllerTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    options_.strict_worker_batches = true;
    options_.measured_costs = false;
    options_.fixed_costs = {0.1, spec::LinearVerifyCost(0.05), 0.05};
  }

  void Start(double draft_error_rate, bool top_has_target = false) {
    FakeWorkerOptions draft;
    draft.draft_error_rate = draft_error_rate;
    draft.top_has_target = top_has_target;
    StartEngine({}, draft);
  }

  // Runs one greedy request of `n` tokens to the end; its output must equal the fakes'
  // target-only greedy decoding.
  Result Run(v1::SpeculationMethod method, std::optional<int> k, int n, int salt = 0) {
    RequestSpec spec;
    spec.prompt = EngineTestPrompt(12, salt);
    spec.max_new_tokens = n;
    spec.method = method;
    spec.k = k;
    const Result out = EngineTest::Run(spec);
    if (out.status.ok()) {
      EXPECT_EQ(out.ids, Reference(spec));
    }
    return out;
  }

  double Metric(const std::string& series) const { return EngineTestMetric(*metrics_, series); }

  static int StepsAtK(const v1::RequestStats& s, int k) {
    return k < s.steps_by_k_size() ? static_cast<int>(s.steps_by_k(k)) : 0;
  }
  static int Off(const v1::RequestStats& s, const std::string& reason) {
    auto it = s.speculation_off_steps().find(reason);
    return it == s.speculation_off_steps().end() ? 0 : static_cast<int>(it->second);
  }
};

TEST_F(EngineControllerTest, ControllersKReachesThePlannerAndTheStats) {
  Start(/*draft_error_rate=*/0.0);  // The draft always agrees: long K pays.
  const Result r = Run(v1::SPECULATION_METHOD_DRAFT, std::nullopt, 120);
  ASSERT_TRUE(r.status.ok()) << r.status;
  const v1::RequestStats& s = r.stats;
  // Every step is accounted at the K it verified, and the K came from the controller:
  // the first step runs the modelled best K at the prior (0.6): the cost model's own
  // choice, computed independently here.
  int steps = 0, proposed = 0;
  for (int k = 0; k < s.steps_by_k_size(); ++k) {
    steps += s.steps_by_k(k);
    proposed += k * s.steps_by_k(k);
  }
  EXPECT_EQ(steps, static_cast<int>(s.target_steps()));
  EXPECT_EQ(proposed, static_cast<int>(s.draft_tokens_proposed()));
  EXPECT_GT(s.speculative_steps(), 0u);
  std::string by_k;
  for (int k = 0; k < s.steps_by_k_size(); ++k) absl::StrAppend(&by_k, " ", s.steps_by_k(k));
  EXPECT_GT(StepsAtK(s, options_.controller.max_k), 0)
      << "full acceptance climbs to max K:" << by_k;
  EXPECT_GT(s.predicted_speedup(), 1.0f);
  EXPECT_LE(s.probe_steps(), s.target_steps() * options_.controller.probe_fraction + 1);
  EXPECT_EQ(Off(s, "controller"), 0);
  EXPECT_GT(Metric("tandem_controller_steps_total{decision=\"speculate\"}"), 0);
  EXPECT_GT(Metric("tandem_controller_k_count"), 0);
  EXPECT_GT(Metric("tandem_controller_predicted_speedup_count"), 0);
}

TEST_F(EngineControllerTest, TurnsSpeculationOffWhenTheDraftNeverAgrees) {
  Start(/*draft_error_rate=*/1.0);
  const Result r = Run(v1::SPECULATION_METHOD_DRAFT, std::nullopt, 150);
  ASSERT_TRUE(r.status.ok()) << r.status;
  const v1::RequestStats& s = r.stats;
  EXPECT_EQ(s.draft_tokens_accepted(), 0u);
  // A few steps before the evidence outweighs the prior, then off except for probes.
  EXPECT_GT(Off(s, "controller"), static_cast<int>(s.target_steps()) * 3 / 4);
  EXPECT_LT(s.speculative_steps(), s.target_steps() / 4);
  EXPECT_GT(Metric("tandem_controller_steps_total{decision=\"controller\"}"), 0);
}

TEST_F(EngineControllerTest, BatchLimitAndFixedKBypassTheController) {
  options_.planner.speculation_max_batch = 0;  // Any running sequence is over the limit.
  Start(0.0);
  const Result adaptive = Run(v1::SPECULATION_METHOD_DRAFT, std::nullopt, 30);
  ASSERT_TRUE(adaptive.status.ok()) << adaptive.status;
  // Every step but the last (no room for a proposal before max_new_tokens).
  EXPECT_EQ(Off(adaptive.stats, "batch_limit"),
            static_cast<int>(adaptive.stats.target_steps()) - 1);
  EXPECT_EQ(Off(adaptive.stats, "length"), 1);
  EXPECT_EQ(adaptive.stats.predicted_speedup(), 0.0f);
  const Result fixed = Run(v1::SPECULATION_METHOD_DRAFT, 3, 30, 1);
  ASSERT_TRUE(fixed.status.ok()) << fixed.status;
  EXPECT_GT(StepsAtK(fixed.stats, 3), 0);
  EXPECT_EQ(fixed.stats.predicted_speedup(), 0.0f);  // Not the controller's choice.
  const Result none = Run(v1::SPECULATION_METHOD_NONE, std::nullopt, 10, 2);
  EXPECT_EQ(Off(none.stats, "not_requested"), static_cast<int>(none.stats.target_steps()));
}

// A server tree budget reaches the controller as the draft's tree option: with a draft
// that ranks the target's token second (a width-3 tree holds it beside each rejected
// node), trees are chosen on most speculative steps, accounted as such, and commit
// more per target step than the same server without a tree budget; the output stays
// target-only. (Where trees do not pay, the option loses to the chain:
// step_choice_test.)
TEST_F(EngineControllerTest, AServerTreeBudgetIsUsedWhereTreesPay) {
  options_.planner.draft_tree_width = 3;
  uint32_t target_steps[2] = {0, 0};
  for (int tree_nodes : {0, 8}) {
    options_.planner.draft_tree_nodes = tree_nodes;
    Start(/*draft_error_rate=*/0.5, /*top_has_target=*/true);
    const Result r = Run(v1::SPECULATION_METHOD_DRAFT, std::nullopt, 150);
    ASSERT_TRUE(r.status.ok()) << r.status;
    target_steps[tree_nodes > 0] = r.stats.target_steps();
    if (tree_nodes == 0) {
      EXPECT_EQ(r.stats.tree_steps(), 0u);
    } else {
      EXPECT_GT(r.stats.tree_steps(), r.stats.speculative_steps() / 2);
    }
    engine_->Stop();
    TearDown();
    engine_.reset();
  }
  EXPECT_LT(target_steps[1], target_steps[0]);
}

}  // namespace
}  // namespace tandem::coordinator
