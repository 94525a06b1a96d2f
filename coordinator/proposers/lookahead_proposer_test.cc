// Lookahead's coordinator half without workers: the first step's guesses come from the
// prompt's n-grams, the window follows the target's Jacobi updates and its columns
// refill the pool, the computed-only window is never counted as proposed, and it is
// left out when the sequence is about to end; the step's shape follows the verify cost
// (sizing from the guesses' measured outcomes) unless the client fixed W and G.
#include "coordinator/proposers/lookahead_proposer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "coordinator/proposers/test_util.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace tandem::coordinator {
namespace {

using V = std::vector<int32_t>;

class LookaheadProposerTest : public ::testing::Test {
 protected:
  void Start(V prompt, int max_new_tokens, LookaheadConfig config) {
    auto tokenizer = Tokenizer::Load("models/target");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::make_unique<Tokenizer>(*std::move(tokenizer));
    ValidatedRequest r;
    r.speculation.method = v1::SPECULATION_METHOD_LOOKAHEAD;
    r.speculation.lookahead = config;
    s_ = testing::MakeSequence(1, r, std::move(prompt), max_new_tokens, tokenizer_.get());
    state_ = p_.NewState(*s_);
  }
  // Commits `tokens` (the sequence's chain has no proposer: only ours sees the step),
  // with the target's Jacobi update `jacobi`.
  std::optional<Candidates> Step(const Candidates& verified, const V& tokens, const V& jacobi) {
    v1::VerifiedSequence result;
    for (int32_t t : tokens) result.add_committed(t);
    if (!jacobi.empty()) {
      v1::NextCandidates* next = result.mutable_next_candidates();
      for (int32_t t : jacobi) *next->add_proposals() = PointMassProposal(t);
    }
    s_->OnVerified(result, verified.depth(), absl::Now());
    return p_.OnVerified(*s_, *state_, verified, result, static_cast<int>(tokens.size()));
  }
  LookaheadState& state() { return static_cast<LookaheadState&>(*state_); }
  static V Tokens(const Candidates& c) {
    V out;
    for (const v1::ProposedToken& t : c.tokens) out.push_back(t.token());
    return out;
  }

  LookaheadProposer p_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Sequence> s_;
  std::unique_ptr<ProposerState> state_;
};

TEST_F(LookaheadProposerTest, GuessesFromThePromptThenTheWindow) {
  Start({5, 6, 7, 8, 5, 6, 9, 1, 2}, 32, {.window = 2, .ngram = 3, .max_guesses = 2});
  EXPECT_EQ(p_.capabilities().site, ProposerSite::kTargetLeader);
  std::optional<Candidates> c = Step(Candidates(), {5}, {});  // A plain first step.
  ASSERT_TRUE(c.has_value());
  // Guesses after 5: "6 9" (most recent), "6 7" (shared 6); then the window {1, 2}.
  EXPECT_EQ(c->acceptable, 3);
  EXPECT_EQ(Tokens(*c), (V{6, 9, 7, 1, 2}));
  EXPECT_EQ(c->parents, (V{-1, 0, 0, -1, 3}));
  EXPECT_EQ(c->depth(), 2);  // The window is not counted as proposed.
  EXPECT_EQ(c->method, v1::SPECULATION_METHOD_LOOKAHEAD);
  EXPECT_EQ(p_.MaxK(*s_, PlannerOptions()), 8);
}

TEST_F(LookaheadProposerTest, TheWindowFollowsTheTargetAndFillsThePool) {
  Start({1, 2, 3}, 32, {.window = 2, .ngram = 3, .max_guesses = 4});
  std::optional<Candidates> c = Step(Candidates(), {40}, {});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(Tokens(*c), (V{2, 3}));  // No guesses for 40 yet; level 0 = the prompt's tail.
  c = Step(*c, {41}, {50, 51});      // Warm-up: a second level.
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(Tokens(*c), (V{2, 3, 50, 51}));
  EXPECT_EQ(c->parents, (V{-1, 0, 0, 1}));
  c = Step(*c, {2}, {1, 1, 60, 61});  // Full: columns (2 50 60), (3 51 61) enter the pool.
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(state().window.levels(), (std::vector<V>{{50, 51}, {60, 61}}));
  // Each key: the window's column, then the committed n-grams ("3 40 41", "2 3 40").
  EXPECT_EQ(state().pool.Find(3), (std::vector<V>{{51, 61}, {40, 41}}));
  EXPECT_EQ(state().pool.Find(2), (std::vector<V>{{50, 60}, {3, 40}}));
  EXPECT_EQ(c->acceptable, 4);  // The guesses for 2, then the window.
  EXPECT_EQ(Tokens(*c), (V{50, 60, 3, 40, 50, 51, 60, 61}));
  EXPECT_EQ(c->parents, (V{-1, 0, -1, 2, -1, 4, 4, 5}));
  // An answer that does not match the window (the newest level alone), or a step
  // without ours: no change.
  Candidates verified = *c;
  c = Step(verified, {7}, {70, 71});
  EXPECT_EQ(state().window.levels(), (std::vector<V>{{50, 51}, {60, 61}}));
  Candidates other;
  other.method = v1::SPECULATION_METHOD_PROMPT_LOOKUP;
  c = Step(other, {7}, {70, 71, 72, 73});
  EXPECT_EQ(state().window.levels(), (std::vector<V>{{50, 51}, {60, 61}}));
}

TEST_F(LookaheadProposerTest, NearTheEndTheWindowIsLeftOut) {
  Start({5, 6, 7, 5}, 3, {.window = 4, .ngram = 3, .max_guesses = 2});
  std::optional<Candidates> c = Step(Candidates(), {6}, {});
  ASSERT_TRUE(c.has_value());  // 2 tokens left: one proposal at most, a guess.
  EXPECT_EQ(Tokens(*c), (V{7}));
  EXPECT_EQ(c->acceptable, 1);
  c = Step(*c, {7, 5}, {});
  EXPECT_FALSE(c.has_value());  // Nothing left to propose for.
}

TEST_F(LookaheadProposerTest, SizingFollowsTheVerifyCost) {
  Start({5, 6, 7, 5, 6, 7, 5, 6, 7}, 64, {.window = 2, .ngram = 3, .max_guesses = 2});
  std::optional<Candidates> c;
  for (int32_t t : {5, 6, 7, 5, 6, 7, 5, 6}) c = Step(Candidates(), {t}, {});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->size(), 2 + 2);  // The caps until measured: the guess "7 5", the window.
  s_->candidates = *c;
  // Every extra row costs two plain steps: no shape pays, the step is plain.
  p_.FitCandidates(s_.get(), *state_, spec::LinearVerifyCost(2.0));
  EXPECT_TRUE(s_->candidates.empty());
  EXPECT_EQ(state().sizer.incumbent(), (spec::LookaheadShape{0, 0}));
  // Rows nearly free: the guess that always matched comes back (the window, which fed
  // nothing yet, is not worth its rows).
  p_.FitCandidates(s_.get(), *state_, spec::LinearVerifyCost(0.001));
  ASSERT_FALSE(s_->candidates.empty());
  EXPECT_EQ(Tokens(s_->candidates), (V{7, 5}));
  EXPECT_EQ(s_->candidates.acceptable, 2);
  EXPECT_EQ(state().sizer.incumbent(), (spec::LookaheadShape{0, 1}));
  EXPECT_NEAR(state().sizer.ExpectedAccepted({0, 1}), 2.0, 1e-9);
}

TEST_F(LookaheadProposerTest, FixedWindowAndGuessesAreHonoured) {
  Start({5, 6, 7, 5, 6, 7, 5, 6, 7}, 64,
        {.window = 2, .ngram = 3, .max_guesses = 2, .fixed_window = true, .fixed_guesses = true});
  std::optional<Candidates> c;
  for (int32_t t : {5, 6, 7, 5, 6, 7, 5, 6}) c = Step(Candidates(), {t}, {});
  ASSERT_TRUE(c.has_value());
  s_->candidates = *c;
  p_.FitCandidates(s_.get(), *state_, spec::LinearVerifyCost(2.0));
  EXPECT_EQ(Tokens(s_->candidates), Tokens(*c));
  EXPECT_EQ(state().sizer.incumbent(), (spec::LookaheadShape{2, 2}));
}

TEST_F(LookaheadProposerTest, RecordsLookupsAndAcceptedLengths) {
  auto registry = std::make_shared<prometheus::Registry>();
  p_ = LookaheadProposer(std::make_shared<LookaheadMetrics>(registry));
  Start({5, 6, 7, 8, 5, 6, 9, 1, 2}, 32, {.window = 2, .ngram = 3, .max_guesses = 2});
  std::optional<Candidates> c = Step(Candidates(), {5}, {});  // Key 5: a hit.
  ASSERT_TRUE(c.has_value());
  v1::VerifiedSequence result;
  result.add_committed(6);
  result.add_committed(42);
  result.set_num_accepted(1);  // Guess "6" accepted, then the correction 42.
  s_->OnVerified(result, c->depth(), absl::Now());
  c = p_.OnVerified(*s_, *state_, *c, result, 2);  // Key 42: a miss.
  const std::string text = prometheus::TextSerializer().Serialize(registry->Collect());
  EXPECT_NE(text.find("tandem_lookahead_lookups_total{result=\"hit\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("tandem_lookahead_lookups_total{result=\"miss\"} 1"), std::string::npos);
  EXPECT_NE(text.find("tandem_lookahead_accepted_length_sum 1"), std::string::npos);
}

}  // namespace
}  // namespace tandem::coordinator
