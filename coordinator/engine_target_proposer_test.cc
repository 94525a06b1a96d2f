// A target-leader proposer through the engine (fake workers): each verify asks the
// target for the next step's candidates, they come back with the verify result and
// are verified the next step, with no draft worker and no draft call; the output is
// target-only greedy decoding.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/engine.h"
#include "coordinator/fake_worker.h"
#include "coordinator/metrics.h"

namespace tandem::coordinator {
namespace {

constexpr int kVocab = 2048;
constexpr v1::SpeculationMethod kMethod = v1::SPECULATION_METHOD_MEDUSA;

// Testonly: proposes nothing itself; takes the candidates the target returned. With
// `fit_depth` > 0, FitCandidates cuts them to that depth and counts its calls.
class TargetLeaderProposer final : public Proposer {
 public:
  explicit TargetLeaderProposer(int fit_depth = 0, std::shared_ptr<int> fits = nullptr)
      : fit_depth_(fit_depth), fits_(std::move(fits)) {}
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
  void FitCandidates(Sequence* s, ProposerState&, const spec::VerifyCostFn&) const override {
    if (fit_depth_ <= 0) return;
    if (fits_ != nullptr) ++*fits_;
    s->candidates.TruncateDepth(fit_depth_);
  }

 private:
  int fit_depth_;
  std::shared_ptr<int> fits_;
};

struct TargetLeaderRun {
  std::vector<int32_t> ids, reference;
  absl::Status status;
  bool done = false;
  FakeWorker::Counters counters;
  std::string last_rejection;
};

// One 24-token greedy request of the target-leader method over a fake target that
// serves it, with `options` (extra_proposers, EOS and the monitor are set here) and
// `proposer`.
TargetLeaderRun RunTargetLeader(
    EngineOptions options,
    std::shared_ptr<TargetLeaderProposer> proposer = std::make_shared<TargetLeaderProposer>()) {
  TargetLeaderRun run;
  auto tokenizer = Tokenizer::Load("models/target");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto metrics = CoordinatorMetrics::Create({});
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  if (!tokenizer.ok() || !metrics.ok()) return run;
  options.monitor_interval = absl::Milliseconds(10);
  options.stop_token_ids = {2};
  options.extra_proposers = {std::move(proposer)};
  FakeWorkerOptions target_options;
  target_options.target_methods = {kMethod};
  auto target = std::make_unique<FakeWorker>(target_options, "target");
  FakeWorker* fake = target.get();
  Engine engine(options, &*tokenizer, std::move(target), nullptr, metrics->get());
  EXPECT_TRUE(engine.Start(absl::Seconds(5)).ok());

  std::vector<int32_t> prompt = {1};
  for (int i = 1; i < 20; ++i) prompt.push_back(3 + (i * 37) % (kVocab - 3));
  const int max_new = 24;
  run.reference = FakeGreedyReference(prompt, max_new, kVocab);
  ValidatedRequest r;
  r.prompt_token_ids = prompt;
  r.max_new_tokens = max_new;
  r.speculation.method = kMethod;
  r.return_token_ids = true;
  r.ignore_eos = true;
  auto channel = std::make_shared<OutputChannel>();
  auto seq = engine.Submit(r, prompt, max_new, absl::Now() + absl::Seconds(60), channel);
  EXPECT_TRUE(seq.ok()) << seq.status();
  if (!seq.ok()) return run;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (!run.done && absl::Now() < give_up) {
    for (OutputChunk& c : channel->Pop(absl::Milliseconds(20))) {
      run.ids.insert(run.ids.end(), c.token_ids.begin(), c.token_ids.end());
      if (c.final) {
        run.done = true;
        run.status = c.status;
      }
    }
  }
  engine.Stop();
  run.counters = fake->counters();
  run.last_rejection = fake->last_rejection();
  return run;
}

TEST(EngineTargetProposerTest, CandidatesComeBackWithTheVerifyAndAreVerifiedNextStep) {
  const TargetLeaderRun run = RunTargetLeader({});
  ASSERT_TRUE(run.done);
  EXPECT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.ids, run.reference);
  EXPECT_EQ(run.counters.rejected, 0) << run.last_rejection;
  EXPECT_EQ(run.counters.draft_calls, 0);
  // The fake's candidates are the target's own continuation: after the first (plain)
  // step every step accepts 3 and commits 4, so 24 tokens take about 7 verifies.
  EXPECT_LE(run.counters.verify_calls, 8);
  EXPECT_EQ(run.counters.next_candidate_requests, run.counters.verify_calls);
}

// When the controller finds that the method does not pay (here every verified node
// costs 4 plain steps), the candidates that came back are not verified: the steps are
// plain (bar its bounded probes) and the output is still the target's.
TEST(EngineTargetProposerTest, CandidatesTheControllerTurnedOffAreNotVerified) {
  EngineOptions options;
  options.measured_costs = false;
  options.fixed_costs.verify_cost = spec::LinearVerifyCost(4.0);
  const TargetLeaderRun run = RunTargetLeader(options);
  ASSERT_TRUE(run.done);
  EXPECT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.ids, run.reference);
  EXPECT_EQ(run.counters.rejected, 0) << run.last_rejection;
  EXPECT_GE(run.counters.verify_calls, 18);
  // Nor are they asked for on the plain steps (their work is not paid): only the
  // steps that chose the method (bounded probes) and the one before each.
  EXPECT_LE(run.counters.next_candidate_requests, 6);
}

// The planner lets a chosen target-leader proposer fit its candidates to the phase
// before they are verified (Lookahead sizes its step there): cut to one node, each
// step commits at most 2 tokens.
TEST(EngineTargetProposerTest, CandidatesAreFittedBeforeTheyAreVerified) {
  auto fits = std::make_shared<int>(0);
  const TargetLeaderRun run =
      RunTargetLeader({}, std::make_shared<TargetLeaderProposer>(/*fit_depth=*/1, fits));
  ASSERT_TRUE(run.done);
  EXPECT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.ids, run.reference);
  EXPECT_GE(run.counters.verify_calls, 12);
  EXPECT_GE(*fits, 11);
}

}  // namespace
}  // namespace tandem::coordinator
