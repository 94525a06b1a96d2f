// The speculation cache (pre-drafted verification outcomes, coordinator/proposers/
// draft_proposer.h) against fake workers: greedy output identical to target-only when
// every outcome hits, when every outcome misses and under load; no draft KV left behind
// (branches released with their sequence); a failed draft call during the fan-out.
#include <gtest/gtest.h>

#include "coordinator/engine_test_fixture.h"

namespace tandem::coordinator {
namespace {

double Metric(const CoordinatorMetrics& m, const std::string& series) {
  return EngineTestMetric(m, series);
}

class SpeculationCacheTest : public EngineTest {
 protected:
  // Lockstep phases with `branches` outcomes pre-drafted per sequence.
  void Start(int branches, double draft_error_rate, bool top_has_target) {
    options_.planner.predraft_branches = branches;
    options_.forced_pipeline_mode = PipelineMode::kLockstep;
    FakeWorkerOptions draft;
    draft.draft_error_rate = draft_error_rate;
    draft.top_has_target = top_has_target;
    StartEngine({}, draft);
  }

  RequestSpec Spec(int salt, std::optional<int> k = 4) {
    RequestSpec s;
    s.prompt = EngineTestPrompt(10 + salt, salt);
    s.max_new_tokens = 60;
    s.k = k;
    s.pipelining = v1::PIPELINING_ON;
    return s;
  }

  // Waits (bounded) for the asynchronous releases: the draft holds no sequence.
  void ExpectDraftEmpty() {
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (!draft_->live_sequences().empty() && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    std::string ids;
    for (uint64_t id : draft_->live_sequences()) ids += " " + std::to_string(id);
    EXPECT_TRUE(ids.empty()) << "left on the draft worker:" << ids;
  }

  double Hits() {
    return Metric(*metrics_, "tandem_speculation_cache_lookups_total{result=\"hit\"}");
  }
  double Misses() {
    return Metric(*metrics_, "tandem_speculation_cache_lookups_total{result=\"miss\"}");
  }
};

// A draft that is always wrong but ranks the target's token second: the first proposal
// is always rejected and the target emits that token, outcome (0, t), pre-drafted on a
// branch, so every step after the first finds its candidates in the cache and the
// draft is called once per verify.
TEST_F(SpeculationCacheTest, EveryOutcomeHits) {
  Start(/*branches=*/3, /*draft_error_rate=*/1, /*top_has_target=*/true);
  const RequestSpec s = Spec(1);
  Output out = Run(s);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.ids, Reference(s));
  EXPECT_EQ(out.stats.draft_tokens_accepted(), 0);
  EXPECT_GE(out.stats.predrafted_steps(), out.stats.target_steps() - 3);
  EXPECT_GE(Hits(), 50);
  EXPECT_LE(Misses(), 2);
  EXPECT_LE(draft_->counters().draft_calls, target_->counters().verify_calls + 3);
  // Each lookup had its likeliest outcome and at most 3 (how many beyond the first the
  // fan-out budget allows depends on the measured call times).
  const double branches = Metric(*metrics_, "tandem_speculation_cache_branches_total");
  EXPECT_GE(branches, Hits() + Misses());
  EXPECT_LE(branches, 3 * (Hits() + Misses()));
  ExpectDraftEmpty();
}

// The same draft without the target's token among its top tokens: nothing hits, every
// step drafts afresh, and the output is still the target's.
TEST_F(SpeculationCacheTest, EveryOutcomeMisses) {
  Start(/*branches=*/3, /*draft_error_rate=*/1, /*top_has_target=*/false);
  const RequestSpec s = Spec(2);
  Output out = Run(s);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.ids, Reference(s));
  EXPECT_EQ(Hits(), 0);
  EXPECT_EQ(out.stats.predrafted_steps(), 0u);
  EXPECT_GE(Misses(), 50);
  EXPECT_GE(draft_->counters().draft_calls, 2 * target_->counters().verify_calls - 10);
  ExpectDraftEmpty();
}

// Partial acceptance under load with fixed and adaptive K: hits after rejections and
// after full acceptance, every output the target's, no batch rejected (TearDown), no
// branch left behind; then a draft call fails during the fan-out and the requests
// still finish with the target's output.
TEST_F(SpeculationCacheTest, IdentityUnderLoadAndAfterAFailedFanOut) {
  Start(/*branches=*/4, /*draft_error_rate=*/0.3, /*top_has_target=*/true);
  std::vector<RequestSpec> specs;
  for (int i = 0; i < 8; ++i) {
    specs.push_back(Spec(i, i % 3 == 0 ? std::nullopt : std::optional<int>(2 + i % 5)));
  }
  std::vector<Output> outs = RunAll(specs);
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSERT_TRUE(outs[i].status.ok()) << outs[i].status;
    EXPECT_EQ(outs[i].ids, Reference(specs[i])) << "request " << i;
    EXPECT_LE(outs[i].stats.draft_tokens_accepted(), outs[i].stats.generated_tokens());
  }
  EXPECT_GT(Hits(), 0);
  ExpectDraftEmpty();

  const int calls = draft_->counters().draft_calls;
  auto submitted = Submit(Spec(20));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  WaitUntil([&] { return draft_->counters().draft_calls >= calls + 4; }, "four draft calls");
  draft_->FailNextSteps(absl::UnavailableError("injected"), 1);
  Output out = Collect(*submitted->second);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.ids, Reference(Spec(20)));
  ExpectDraftEmpty();
}

// Draft trees (one sibling per drafted token): a draft that is wrong half the time but
// ranks the target's token second gets a rejected position's correction accepted as a
// sibling, so steps commit more tokens than with chains, and the output is the target's.
TEST_F(SpeculationCacheTest, DraftTreeSiblingsCommitMorePerStepWithTheTargetsOutput) {
  int steps[2] = {0, 0};
  for (int siblings : {0, 1}) {
    options_.planner.draft_tree_siblings = siblings;
    Start(/*branches=*/1, /*draft_error_rate=*/0.5, /*top_has_target=*/true);
    const RequestSpec s = Spec(3);
    Output out = Run(s);
    ASSERT_TRUE(out.status.ok()) << out.status;
    EXPECT_EQ(out.ids, Reference(s)) << siblings << " siblings";
    EXPECT_LE(out.stats.draft_tokens_accepted(), out.stats.generated_tokens());
    steps[siblings] = out.stats.target_steps();
    engine_->Stop();
    TearDown();
    engine_.reset();
  }
  EXPECT_LT(steps[1], steps[0]);
}

// Dynamic draft trees (8 nodes, width 3) with the same draft: the target's token,
// second in the draft's top tokens, is a child beside each rejected node, so steps
// commit more than chains; the output is the target's with pipelining on (no
// pre-drafting for trees) and off, and no draft KV is left behind.
TEST_F(SpeculationCacheTest, DynamicDraftTreesCommitMorePerStepWithTheTargetsOutput) {
  for (v1::Pipelining pipelining : {v1::PIPELINING_ON, v1::PIPELINING_OFF}) {
    int steps[2] = {0, 0};
    for (int tree : {0, 1}) {
      options_.planner.draft_tree_nodes = tree * 8;
      options_.planner.draft_tree_width = 3;
      Start(/*branches=*/1, /*draft_error_rate=*/0.5, /*top_has_target=*/true);
      RequestSpec s = Spec(3);
      s.pipelining = pipelining;
      Output out = Run(s);
      ASSERT_TRUE(out.status.ok()) << out.status;
      EXPECT_EQ(out.ids, Reference(s)) << "tree " << tree << " pipelining " << pipelining;
      EXPECT_LE(out.stats.draft_tokens_accepted(), out.stats.generated_tokens());
      steps[tree] = out.stats.target_steps();
      ExpectDraftEmpty();
      engine_->Stop();
      TearDown();
      engine_.reset();
    }
    EXPECT_LT(steps[1], steps[0]) << "pipelining " << pipelining;
  }
}

}  // namespace
}  // namespace tandem::coordinator
