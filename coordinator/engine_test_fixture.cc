#include "coordinator/engine_test_fixture.h"

namespace tandem::coordinator {

std::vector<int32_t> EngineTestPrompt(int length, int salt) {
  std::vector<int32_t> p = {1};
  for (int i = 1; i < length; ++i) {
    p.push_back(3 + (i * 37 + salt * 101) % (kEngineTestVocab - 3));
  }
  return p;
}

double EngineTestMetric(const CoordinatorMetrics& m, const std::string& series) {
  const std::string text = m.Serialize();
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::stod(text.substr(at + series.size() + 2));
}

void EngineTest::SetUp() {
  auto t = Tokenizer::Load("models/target");
  ASSERT_TRUE(t.ok()) << t.status();
  tokenizer_ = std::make_unique<Tokenizer>(*std::move(t));
  auto m = CoordinatorMetrics::Create({});
  ASSERT_TRUE(m.ok()) << m.status();
  metrics_ = *std::move(m);
  options_.monitor_interval = absl::Milliseconds(10);
  options_.stop_token_ids = {2};
  // The fixed cost terms: whether speculation pays must not depend on how fast this
  // machine runs the fakes (engine_controller_test.cc covers the controller).
  options_.measured_costs = false;
}

void EngineTest::TearDown() {
  if (engine_ == nullptr) return;
  engine_->Stop();
  EXPECT_EQ(engine_->rejected_batches(), 0) << "the engine built a batch a worker rejected";
  EXPECT_EQ(target_->counters().rejected, 0) << target_->last_rejection();
  if (draft_ != nullptr) {
    EXPECT_EQ(draft_->counters().rejected, 0) << draft_->last_rejection();
  }
}

void EngineTest::StartEngine(FakeWorkerOptions target, FakeWorkerOptions draft, bool with_draft,
                             bool draft_down_at_start) {
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
  ASSERT_TRUE(engine_->Start(draft_down_at_start ? absl::Milliseconds(50) : absl::Seconds(5)).ok());
}

absl::StatusOr<std::pair<std::shared_ptr<Sequence>, std::shared_ptr<OutputChannel>>>
EngineTest::Submit(const RequestSpec& spec) {
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

bool EngineTest::Read(OutputChannel& channel, Output* out, int min_tokens, absl::Duration timeout) {
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

EngineTest::Output EngineTest::Collect(OutputChannel& channel, absl::Duration timeout) {
  Output out;
  Read(channel, &out, -1, timeout);
  return out;
}

void EngineTest::WaitUntil(const std::function<bool()>& condition, const char* what) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!condition()) {
    if (absl::Now() > give_up) {
      ADD_FAILURE() << "timed out waiting for " << what;
      return;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

std::vector<EngineTest::Output> EngineTest::RunAll(const std::vector<RequestSpec>& specs) {
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

std::vector<int32_t> EngineTest::Reference(const RequestSpec& spec) {
  return FakeGreedyReference(spec.prompt, spec.max_new_tokens, kEngineTestVocab);
}

}  // namespace tandem::coordinator
