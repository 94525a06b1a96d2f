// The engine against failing fake workers (coordinator/fake_worker.h): draft outage,
// fallback and return, draft batch rejections, target outage and recovery timeout, and a
// draft that comes up after start-up. Output stays identical to target-only decoding.
// Every test that expects no rejections checks that no worker rejected a batch.
#include <gtest/gtest.h>

#include "coordinator/engine_test_fixture.h"

namespace tandem::coordinator {
namespace {

// Short names for the shared fixture's helpers (coordinator/engine_test_fixture.h).
std::vector<int32_t> Prompt(int length, int salt) { return EngineTestPrompt(length, salt); }
double Metric(const CoordinatorMetrics& m, const std::string& series) {
  return EngineTestMetric(m, series);
}

TEST_F(EngineTest, DraftOutageFallsBackAndTheDraftIsReadoptedAfterARestart) {
  FakeWorkerOptions slow;  // 300 tokens take >= 60 steps of 3 ms: the outage hits mid-way.
  slow.step_delay = absl::Milliseconds(3);
  StartEngine(slow, {});
  RequestSpec s;
  s.prompt = Prompt(20, 1);
  s.max_new_tokens = 300;
  auto submitted = Submit(s);
  ASSERT_TRUE(submitted.ok());
  Output out;
  ASSERT_FALSE(Read(*submitted->second, &out, 20));
  draft_->SetDown(true, /*restart=*/true);
  const absl::Time down_at = absl::Now();
  WaitUntil([&] { return !engine_->draft_available() || absl::Now() - down_at > absl::Seconds(5); },
            "the draft outage to be noticed");
  EXPECT_FALSE(engine_->draft_available());
  EXPECT_EQ(Metric(*metrics_, "tandem_draft_available"), 0);
  absl::SleepFor(absl::Milliseconds(50));
  const int drafts_before = draft_->counters().draft_calls;
  draft_->SetDown(false);
  WaitUntil([&] { return engine_->draft_available(); }, "the draft to be re-adopted");
  Read(*submitted->second, &out);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.ids, Reference(s));
  EXPECT_GT(out.stats.fallback_steps(), 0);
  EXPECT_GT(Metric(*metrics_, "tandem_fallback_steps_total{reason=\"draft_down\"}"), 0);
  EXPECT_TRUE(engine_->draft_available());
  EXPECT_GT(draft_->counters().draft_calls, drafts_before) << "the draft was not used again";
  // After the return, a new request speculates from its first step.
  RequestSpec later = s;
  later.prompt = Prompt(15, 2);
  later.max_new_tokens = 30;
  Output again = Run(later);
  EXPECT_EQ(again.ids, Reference(later));
  EXPECT_GT(again.stats.draft_tokens_proposed(), 0);
}

TEST_F(EngineTest, ADraftRejectionIsNotAnOutageAndOnlyThatStepFallsBack) {
  StartEngine();
  // The draft's first three answers reject the batch (as if the engine had built a bad
  // one): each costs the sequence one target-only step, and the draft stays in use.
  draft_->FailNextSteps(absl::InvalidArgumentError("test: bad batch"));
  draft_->FailNextSteps(absl::ResourceExhaustedError("test: over budget"));
  draft_->FailNextSteps(absl::OutOfRangeError("test: out of range"));
  RequestSpec s;
  s.prompt = Prompt(20, 3);
  s.max_new_tokens = 60;
  s.pipelining = v1::PIPELINING_OFF;
  auto submitted = Submit(s);
  ASSERT_TRUE(submitted.ok());
  Output out = Collect(*submitted->second);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.ids, Reference(s));
  EXPECT_EQ(engine_->rejected_batches(), 3);
  EXPECT_EQ(out.stats.fallback_steps(), 3);
  EXPECT_EQ(Metric(*metrics_, "tandem_fallback_steps_total{reason=\"draft_rejected\"}"), 3);
  EXPECT_EQ(
      Metric(*metrics_,
             "tandem_worker_rejected_batches_total{code=\"invalid_argument\",worker=\"draft\"}"),
      1);
  EXPECT_EQ(Metric(*metrics_, "tandem_draft_available"), 1);
  EXPECT_TRUE(engine_->draft_available());
  EXPECT_GT(out.stats.draft_tokens_accepted(), 0);
  // Expected rejections: TearDown must not count them as engine bugs.
  engine_->Stop();
  engine_.reset();
}

TEST_F(EngineTest, TargetOutagePausesAndResumesTokenExact) {
  FakeWorkerOptions slow;  // 200 tokens take >= 40 steps of 3 ms: the outage hits mid-way.
  slow.step_delay = absl::Milliseconds(3);
  StartEngine(slow, {});
  RequestSpec s;
  s.prompt = Prompt(20, 4);
  s.max_new_tokens = 200;
  auto submitted = Submit(s);
  ASSERT_TRUE(submitted.ok());
  Output out;
  ASSERT_FALSE(Read(*submitted->second, &out, 10));
  target_->SetDown(true, /*restart=*/true);
  WaitUntil([&] { return !engine_->target_available(); }, "the target outage to be noticed");
  absl::SleepFor(absl::Milliseconds(50));
  target_->SetDown(false);
  Read(*submitted->second, &out);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.ids, Reference(s));  // Nothing repeated, nothing skipped.
}

TEST_F(EngineTest, TargetThatStaysDownFailsWithinTheRecoveryTimeout) {
  options_.target_recovery_timeout = absl::Milliseconds(200);
  FakeWorkerOptions slow;
  slow.step_delay = absl::Milliseconds(3);
  StartEngine(slow, {});
  RequestSpec s;
  s.prompt = Prompt(20, 5);
  s.max_new_tokens = 500;
  auto submitted = Submit(s);
  ASSERT_TRUE(submitted.ok());
  Output out;
  ASSERT_FALSE(Read(*submitted->second, &out, 5));
  target_->SetDown(true);
  Read(*submitted->second, &out, -1, absl::Seconds(10));
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable) << out.status;
}

TEST_F(EngineTest, ADraftThatComesUpLateIsUsedWithinItsOwnLimits) {
  // The draft is down at start-up; when it appears, its limits (a small batch, a short
  // context, few proposals) must be taken from its description before it is used.
  FakeWorkerOptions draft;
  draft.max_batch_tokens = 96;
  draft.max_speculative_tokens = 3;
  draft.context_length = 200;
  StartEngine({}, draft, /*with_draft=*/true, /*draft_down_at_start=*/true);
  EXPECT_FALSE(engine_->cluster().draft_described);
  draft_->SetDown(false);
  WaitUntil([&] { return engine_->draft_available(); }, "the draft to be re-adopted");
  EXPECT_TRUE(engine_->cluster().draft_described);
  EXPECT_EQ(engine_->cluster().draft.max_batch_tokens(), 96u);
  std::vector<RequestSpec> specs;
  for (int i = 0; i < 4; ++i) {
    RequestSpec s;
    s.prompt = Prompt(150, 40 + i);
    s.max_new_tokens = 80;  // Runs past the draft's context: target-only from there.
    s.k = 6;
    specs.push_back(s);
  }
  std::vector<Output> outs = RunAll(specs);
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSERT_TRUE(outs[i].status.ok()) << outs[i].status;
    EXPECT_EQ(outs[i].ids, Reference(specs[i]));
    EXPECT_GT(outs[i].stats.draft_tokens_proposed(), 0);
  }
  EXPECT_LE(draft_->counters().max_position, 199);
}

}  // namespace
}  // namespace tandem::coordinator
