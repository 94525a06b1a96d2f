// A target-leader proposer through the engine (fake workers): each verify asks the
// target for the next step's candidates, they come back with the verify result and
// are verified the next step, with no draft worker and no draft call; the output is
// target-only greedy decoding.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "coordinator/engine.h"
#include "coordinator/fake_worker.h"
#include "coordinator/metrics.h"

namespace tandem::coordinator {
namespace {

constexpr int kVocab = 2048;
constexpr v1::SpeculationMethod kMethod = v1::SPECULATION_METHOD_MEDUSA;

// Testonly: proposes nothing itself; takes the candidates the target returned.
class TargetLeaderProposer final : public Proposer {
 public:
  v1::SpeculationMethod method() const override { return kMethod; }
  ProposerCapabilities capabilities() const override {
    ProposerCapabilities c;
    c.site = ProposerSite::kTargetLeader;
    c.makes_trees = true;
    c.explicit_positions = true;
    return c;
  }
  std::unique_ptr<ProposerState> NewState(const Sequence&) const override {
    return std::make_unique<ProposerState>();
  }
  const char* Unusable(const Sequence&, const ProposerState&, const WorkerAvailability&,
                       const PlannerOptions&) const override {
    return nullptr;
  }
  int MaxK(const Sequence&, const PlannerOptions&) const override { return 3; }
  std::optional<Candidates> OnVerified(const Sequence&, ProposerState&, const Candidates&,
                                       const v1::VerifiedSequence& result, int) const override {
    if (!result.has_next_candidates()) return std::nullopt;
    const v1::NextCandidates& next = result.next_candidates();
    Candidates c;
    c.method = next.method();
    c.site = ProposerSite::kTargetLeader;
    c.tokens.assign(next.proposals().begin(), next.proposals().end());
    c.parents.assign(next.parents().begin(), next.parents().end());
    c.positions.assign(next.positions().begin(), next.positions().end());
    return c;
  }
};

TEST(EngineTargetProposerTest, CandidatesComeBackWithTheVerifyAndAreVerifiedNextStep) {
  auto tokenizer = Tokenizer::Load("models/target");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto metrics = CoordinatorMetrics::Create({});
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EngineOptions options;
  options.monitor_interval = absl::Milliseconds(10);
  options.eos_token_id = 2;
  options.extra_proposers = {std::make_shared<TargetLeaderProposer>()};
  FakeWorkerOptions target_options;
  target_options.target_methods = {kMethod};
  auto target = std::make_unique<FakeWorker>(target_options, "target");
  FakeWorker* fake = target.get();
  Engine engine(options, &*tokenizer, std::move(target), nullptr, metrics->get());
  ASSERT_TRUE(engine.Start(absl::Seconds(5)).ok());

  std::vector<int32_t> prompt = {1};
  for (int i = 1; i < 20; ++i) prompt.push_back(3 + (i * 37) % (kVocab - 3));
  const int max_new = 24;
  ValidatedRequest r;
  r.prompt_token_ids = prompt;
  r.max_new_tokens = max_new;
  r.speculation.method = kMethod;
  r.return_token_ids = true;
  r.ignore_eos = true;
  auto channel = std::make_shared<OutputChannel>();
  auto seq = engine.Submit(r, prompt, max_new, absl::Now() + absl::Seconds(60), channel);
  ASSERT_TRUE(seq.ok()) << seq.status();
  std::vector<int32_t> ids;
  bool done = false;
  absl::Status status;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (!done && absl::Now() < give_up) {
    for (OutputChunk& c : channel->Pop(absl::Milliseconds(20))) {
      ids.insert(ids.end(), c.token_ids.begin(), c.token_ids.end());
      if (c.final) {
        done = true;
        status = c.status;
      }
    }
  }
  engine.Stop();
  ASSERT_TRUE(done);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(ids, FakeGreedyReference(prompt, max_new, kVocab));
  const FakeWorker::Counters counters = fake->counters();
  EXPECT_EQ(counters.rejected, 0) << fake->last_rejection();
  EXPECT_EQ(counters.draft_calls, 0);
  // The fake's candidates are the target's own continuation: after the first (plain)
  // step every step accepts 3 and commits 4, so 24 tokens take about 7 verifies.
  EXPECT_LE(counters.verify_calls, 8);
}

}  // namespace
}  // namespace tandem::coordinator
