// The engine against fake workers (coordinator/fake_worker.h): greedy output identical
// to target-only decoding in every mode, draft failure and return, target failure,
// continuation hit and miss, cancellation, deadlines, KV admission, and batches that
// must stay within the workers' limits (context end, draft prefill budget). Every test
// also checks that no worker ever rejected a batch the engine built.
#include "coordinator/engine.h"

#include <gtest/gtest.h>

#include "coordinator/fake_worker.h"
#include "coordinator/metrics.h"

namespace tandem::coordinator {
namespace {

constexpr int kVocab = 2048;

struct Output {
  std::vector<int32_t> ids;
  std::string text;
  absl::Status status;
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::RequestStats stats;
};

struct RequestSpec {
  std::vector<int32_t> prompt;
  int max_new_tokens = 40;
  v1::SpeculationMethod method = v1::SPECULATION_METHOD_DRAFT;
  std::optional<int> k = 4;
  v1::Pipelining pipelining = v1::PIPELINING_DEFAULT;
  std::vector<std::string> stop;
  absl::Duration timeout = absl::Seconds(60);
};

std::vector<int32_t> Prompt(int length, int salt) {
  std::vector<int32_t> p = {1};
  for (int i = 1; i < length; ++i) p.push_back(3 + (i * 37 + salt * 101) % (kVocab - 3));
  return p;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tokenizer::Load("models/target");
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::make_unique<Tokenizer>(*std::move(t));
    auto m = CoordinatorMetrics::Create({});
    ASSERT_TRUE(m.ok()) << m.status();
    metrics_ = *std::move(m);
    options_.monitor_interval = absl::Milliseconds(10);
    options_.eos_token_id = 2;
    // The fixed cost terms: whether speculation pays must not depend on how fast this
    // machine runs the fakes (engine_controller_test covers the controller).
    options_.measured_costs = false;
  }

  // Checks that no worker ever rejected a batch. A test that expects rejections resets
  // engine_ (which owns the fakes) before it ends.
  void TearDown() override {
    if (engine_ == nullptr) return;
    engine_->Stop();
    EXPECT_EQ(engine_->rejected_batches(), 0) << "the engine built a batch a worker rejected";
    EXPECT_EQ(target_->counters().rejected, 0) << target_->last_rejection();
    if (draft_ != nullptr) {
      EXPECT_EQ(draft_->counters().rejected, 0) << draft_->last_rejection();
    }
  }

  // Starts the engine over fakes with these options (draft: none when !with_draft).
  void StartEngine(FakeWorkerOptions target, FakeWorkerOptions draft, bool with_draft = true,
                   bool draft_down_at_start = false) {
    target.draft = false;
    draft.draft = true;
    auto t = std::make_unique<FakeWorker>(target, "target");
    target_ = t.get();
    std::unique_ptr<FakeWorker> d;
    if (with_draft) {
      d = std::make_unique<FakeWorker>(draft, "draft");
      draft_ = d.get();
      if (draft_down_at_start) draft_->SetDown(true);
    }
    engine_ = std::make_unique<Engine>(options_, tokenizer_.get(), std::move(t), std::move(d),
                                       metrics_.get());
    ASSERT_TRUE(
        engine_->Start(draft_down_at_start ? absl::Milliseconds(50) : absl::Seconds(5)).ok());
  }
  void StartEngine() { StartEngine({}, {}); }

  absl::StatusOr<std::pair<std::shared_ptr<Sequence>, std::shared_ptr<OutputChannel>>> Submit(
      const RequestSpec& spec) {
    ValidatedRequest r;
    r.prompt_token_ids = spec.prompt;
    r.max_new_tokens = spec.max_new_tokens;
    r.speculation.method = spec.method;
    r.speculation.fixed_k = spec.k;
    r.speculation.pipelining = spec.pipelining;
    r.stop = spec.stop;
    r.return_token_ids = true;
    r.ignore_eos = true;
    auto channel = std::make_shared<OutputChannel>();
    auto seq =
        engine_->Submit(r, spec.prompt, spec.max_new_tokens, absl::Now() + spec.timeout, channel);
    if (!seq.ok()) return seq.status();
    return std::make_pair(*seq, channel);
  }

  // Reads `channel` into `out` until the final chunk (returns true) or, when
  // min_tokens >= 0, until `out` holds that many tokens (returns false); fails the test
  // after `timeout`.
  static bool Read(OutputChannel& channel, Output* out, int min_tokens = -1,
                   absl::Duration timeout = absl::Seconds(60)) {
    const absl::Time give_up = absl::Now() + timeout;
    while (absl::Now() < give_up) {
      if (min_tokens >= 0 && static_cast<int>(out->ids.size()) >= min_tokens) return false;
      for (OutputChunk& c : channel.Pop(absl::Milliseconds(20))) {
        out->ids.insert(out->ids.end(), c.token_ids.begin(), c.token_ids.end());
        out->text += c.text;
        if (c.final) {
          out->status = c.status;
          out->reason = c.finish_reason;
          out->stats = c.stats;
          return true;
        }
      }
    }
    ADD_FAILURE() << "no output within " << timeout;
    out->status = absl::DeadlineExceededError("test: no final chunk");
    return true;
  }

  static Output Collect(OutputChannel& channel, absl::Duration timeout = absl::Seconds(60)) {
    Output out;
    Read(channel, &out, -1, timeout);
    return out;
  }

  // Polls `condition` every millisecond; fails the test after 10 s.
  static void WaitUntil(const std::function<bool()>& condition, const char* what) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (!condition()) {
      if (absl::Now() > give_up) {
        ADD_FAILURE() << "timed out waiting for " << what;
        return;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
  }

  // Submits every request at once and collects their outputs.
  std::vector<Output> RunAll(const std::vector<RequestSpec>& specs) {
    std::vector<std::shared_ptr<OutputChannel>> channels;
    for (const RequestSpec& spec : specs) {
      auto submitted = Submit(spec);
      EXPECT_TRUE(submitted.ok()) << submitted.status();
      if (!submitted.ok()) return {};
      channels.push_back(submitted->second);
    }
    std::vector<Output> outs;
    for (auto& c : channels) outs.push_back(Collect(*c));
    return outs;
  }

  Output Run(const RequestSpec& spec) { return RunAll({spec})[0]; }

  static std::vector<int32_t> Reference(const RequestSpec& spec) {
    return FakeGreedyReference(spec.prompt, spec.max_new_tokens, kVocab);
  }

  EngineOptions options_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<Engine> engine_;
  FakeWorker* target_ = nullptr;
  FakeWorker* draft_ = nullptr;
};

double Metric(const CoordinatorMetrics& m, const std::string& series) {
  const std::string text = m.Serialize();
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST_F(EngineTest, GreedyOutputIsTargetOnlyInEveryMode) {
  StartEngine();
  std::vector<RequestSpec> specs;
  int salt = 0;
  for (auto method : {v1::SPECULATION_METHOD_NONE, v1::SPECULATION_METHOD_DRAFT,
                      v1::SPECULATION_METHOD_PROMPT_LOOKUP, v1::SPECULATION_METHOD_AUTO}) {
    for (auto pipelining : {v1::PIPELINING_ON, v1::PIPELINING_OFF}) {
      for (std::optional<int> k :
           {std::optional<int>(1), std::optional<int>(6), std::optional<int>()}) {
        RequestSpec s;
        s.prompt = Prompt(12 + salt, salt);
        ++salt;
        s.method = method;
        s.k = k;
        s.pipelining = pipelining;
        specs.push_back(s);
      }
    }
  }
  // Half the requests one after another (pipelining modes apply), half all at once.
  for (size_t i = 0; i < specs.size(); i += 4) {
    Output out = Run(specs[i]);
    ASSERT_TRUE(out.status.ok()) << out.status;
    EXPECT_EQ(out.ids, Reference(specs[i])) << "request " << i;
  }
  std::vector<Output> outs = RunAll(specs);
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSERT_TRUE(outs[i].status.ok()) << outs[i].status;
    EXPECT_EQ(outs[i].ids, Reference(specs[i])) << "request " << i;
    EXPECT_EQ(outs[i].reason, v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(outs[i].stats.generated_tokens(), specs[i].max_new_tokens);
    EXPECT_LE(outs[i].stats.draft_tokens_accepted(), outs[i].stats.generated_tokens());
    if (specs[i].method == v1::SPECULATION_METHOD_DRAFT) {
      EXPECT_GT(outs[i].stats.draft_tokens_accepted(), 0) << "request " << i;
    }
  }
  EXPECT_EQ(Metric(*metrics_, "tandem_draft_available"), 1);
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

TEST_F(EngineTest, ContinuationHitsSkipTheDraftPhaseAndMissesCostOne) {
  // A perfect draft: every continuation is usable, so after the first step each phase
  // verifies and drafts the next step at once (one Draft call per Verify call).
  FakeWorkerOptions perfect;
  perfect.draft_error_rate = 0;
  StartEngine({}, perfect);
  RequestSpec s;
  s.prompt = Prompt(20, 6);
  s.max_new_tokens = 100;
  s.pipelining = v1::PIPELINING_ON;
  Output out = Run(s);
  EXPECT_EQ(out.ids, Reference(s));
  const FakeWorker::Counters hit_target = target_->counters(), hit_draft = draft_->counters();
  EXPECT_EQ(out.stats.target_steps(), 20);  // 100 tokens, K = 4: 5 per step.
  EXPECT_LE(hit_draft.draft_calls, hit_target.verify_calls + 1);
  engine_->Stop();
  TearDown();
  engine_.reset();

  // A draft that is always wrong: no continuation is ever usable, every step needs its
  // own draft phase before the verify.
  FakeWorkerOptions wrong;
  wrong.draft_error_rate = 1;
  StartEngine({}, wrong);
  Output miss = Run(s);
  EXPECT_EQ(miss.ids, Reference(s));
  EXPECT_EQ(miss.stats.draft_tokens_accepted(), 0);
  // (The last few steps have no continuation: too few tokens are left.)
  EXPECT_GE(draft_->counters().draft_calls, 2 * target_->counters().verify_calls - 10);
}

TEST_F(EngineTest, CancellationEndsTheRequestAndReleasesItsCaches) {
  StartEngine();
  RequestSpec s;
  s.prompt = Prompt(20, 7);
  s.max_new_tokens = 10000;
  auto submitted = Submit(s);
  ASSERT_TRUE(submitted.ok());
  Output out;
  ASSERT_FALSE(Read(*submitted->second, &out, 5));
  engine_->Cancel(submitted->first);
  Read(*submitted->second, &out);
  EXPECT_EQ(out.status.code(), absl::StatusCode::kCancelled);
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (target_->counters().released_sequences < 1 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(target_->counters().released_sequences, 1);
}

TEST_F(EngineTest, DeadlineEndsRunningAndQueuedRequests) {
  // Room for one sequence at a time on the target: the second waits for KV.
  FakeWorkerOptions target;
  target.kv_total_blocks = 8;
  target.step_delay = absl::Milliseconds(10);
  StartEngine(target, {});
  RequestSpec first;
  first.prompt = Prompt(20, 8);
  first.max_new_tokens = 90;  // 20 + 90 + 9 = 119 tokens: 8 blocks; >= 18 steps of 10 ms.
  first.timeout = absl::Seconds(5);
  RequestSpec second = first;
  second.prompt = Prompt(20, 9);
  second.timeout = absl::Milliseconds(100);
  auto a = Submit(first);
  ASSERT_TRUE(a.ok());
  absl::SleepFor(absl::Milliseconds(20));
  auto b = Submit(second);
  ASSERT_TRUE(b.ok());
  Output queued = Collect(*b->second, absl::Seconds(5));
  EXPECT_EQ(queued.status.code(), absl::StatusCode::kDeadlineExceeded) << queued.status;
  EXPECT_NE(queued.status.message().find("waiting"), absl::string_view::npos) << queued.status;
  Output running = Collect(*a->second, absl::Seconds(5));
  EXPECT_TRUE(running.status.ok()) << running.status;
  // A running request past its deadline ends too.
  RequestSpec third = first;
  third.prompt = Prompt(20, 15);
  third.timeout = absl::Milliseconds(50);
  Output late = Run(third);
  EXPECT_EQ(late.status.code(), absl::StatusCode::kDeadlineExceeded) << late.status;
  EXPECT_GT(late.stats.generated_tokens(), 0);
}

TEST_F(EngineTest, KvAdmissionRefusesTheImpossibleAndRunsTargetOnlyWhenTheDraftIsTooSmall) {
  FakeWorkerOptions target, draft;
  target.kv_total_blocks = 20;
  draft.kv_total_blocks = 4;
  StartEngine(target, draft);
  RequestSpec huge;
  huge.prompt = Prompt(300, 10);
  huge.max_new_tokens = 100;  // 409 tokens: 26 blocks > 20.
  auto refused = Submit(huge);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("needs 26 KV blocks"), absl::string_view::npos)
      << refused.status();
  // 20 + 80 + 9 = 109 tokens: 7 blocks, more than the draft's 4: runs without the draft,
  // and two of them wait for each other on the target (14 > 20 - 7... both fit: 14 <= 20).
  RequestSpec big;
  big.prompt = Prompt(20, 11);
  big.max_new_tokens = 80;
  std::vector<RequestSpec> specs = {big, big, big};
  specs[1].prompt = Prompt(20, 12);
  specs[2].prompt = Prompt(20, 13);  // Third: 21 > 20 blocks: waits for the first.
  std::vector<Output> outs = RunAll(specs);
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSERT_TRUE(outs[i].status.ok()) << outs[i].status;
    EXPECT_EQ(outs[i].ids, Reference(specs[i]));
    EXPECT_EQ(outs[i].stats.draft_tokens_proposed(), 0);
    EXPECT_GT(outs[i].stats.fallback_steps(), 0);
  }
  EXPECT_GT(Metric(*metrics_, "tandem_fallback_steps_total{reason=\"draft_kv\"}"), 0);
  EXPECT_EQ(draft_->counters().draft_calls, 0);
}

TEST_F(EngineTest, RequestRunsToTheLastContextPositionWithPipelining) {
  FakeWorkerOptions small;
  small.context_length = 64;
  StartEngine(small, small);
  options_.planner.context_length = 64;
  for (std::optional<int> k :
       {std::optional<int>(8), std::optional<int>(3), std::optional<int>()}) {
    RequestSpec s;
    s.prompt = Prompt(10, 14);
    s.max_new_tokens = 54;  // Ends at position 63, the last one.
    s.k = k;
    s.pipelining = v1::PIPELINING_ON;
    Output out = Run(s);
    ASSERT_TRUE(out.status.ok()) << out.status;
    EXPECT_EQ(out.ids, Reference(s));
  }
  EXPECT_LE(draft_->counters().max_position, 63);
  EXPECT_LE(target_->counters().max_position, 63);
  EXPECT_TRUE(engine_->draft_available());
}

TEST_F(EngineTest, LongPromptsStayWithinTheDraftsBatchBudget) {
  FakeWorkerOptions target, draft;
  target.kv_total_blocks = 16384;
  draft.kv_total_blocks = 16384;
  StartEngine(target, draft);
  std::vector<RequestSpec> specs;
  for (int i = 0; i < 8; ++i) {
    RequestSpec s;
    s.prompt = Prompt(1500, 20 + i);
    s.max_new_tokens = 12;
    specs.push_back(s);
  }
  std::vector<Output> outs = RunAll(specs);
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSERT_TRUE(outs[i].status.ok()) << outs[i].status;
    EXPECT_EQ(outs[i].ids, Reference(specs[i]));
  }
  EXPECT_TRUE(engine_->draft_available());
  EXPECT_GT(draft_->counters().draft_calls, 0);
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

TEST_F(EngineTest, StopStringsEndIdsWhereTheTextEnds) {
  StartEngine();
  RequestSpec base;
  base.prompt = Prompt(16, 30);
  base.max_new_tokens = 60;
  base.method = v1::SPECULATION_METHOD_NONE;
  const Output plain = Run(base);
  ASSERT_TRUE(plain.status.ok());
  // Stop strings taken from the middle of the target-only text.
  int checked = 0;
  for (size_t at : {plain.text.size() / 3, plain.text.size() / 2, 2 * plain.text.size() / 3}) {
    const std::string stop = plain.text.substr(at, 3);
    if (stop.size() < 3) continue;
    RequestSpec none = base;
    none.stop = {stop};
    RequestSpec spec = none;
    spec.method = v1::SPECULATION_METHOD_DRAFT;
    spec.k = 8;
    const Output a = Run(none), b = Run(spec);
    ASSERT_TRUE(a.status.ok() && b.status.ok());
    EXPECT_EQ(a.reason, v1::FINISH_REASON_STOP) << stop;
    EXPECT_EQ(b.text, a.text) << stop;
    EXPECT_EQ(b.ids, a.ids) << stop;
    EXPECT_EQ(b.stats.generated_tokens(), a.stats.generated_tokens()) << stop;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace tandem::coordinator
