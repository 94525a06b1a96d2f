#include "spec/lookahead_sizing.h"

#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace spec {
namespace {

// W = 8, N = 3, G = 8: guesses of 2 tokens, shapes up to 32 positions.
LookaheadSizingConfig Caps() {
  LookaheadSizingConfig c;
  c.max_window = 8;
  c.max_guesses = 8;
  c.ngram = 3;
  return c;
}

// A step whose rank-r guess (from window column `sources[r]`) matched `matched[r]`.
std::vector<GuessOutcome> Step(const std::vector<int>& sources, const std::vector<int>& matched) {
  std::vector<GuessOutcome> out;
  for (size_t i = 0; i < sources.size(); ++i) out.push_back({sources[i], matched[i]});
  return out;
}

// A rich pool: the guess of rank r comes from window column r and matches 2 tokens when
// (r + step) % 8 == 7, else (r + step) % 2: only all 8 ranks and columns see a full
// match on every step.
void ObserveRichPool(LookaheadSizer* sizer, int steps) {
  for (int i = 0; i < steps; ++i) {
    std::vector<GuessOutcome> guesses;
    for (int r = 0; r < 8; ++r) guesses.push_back({r, (r + i) % 8 == 7 ? 2 : (r + i) % 2});
    sizer->Observe(guesses, 8);
  }
}

TEST(LookaheadSizerTest, GridHasPlainCapsAndPowersOfTwo) {
  LookaheadSizingConfig c = Caps();
  c.max_window = 5;
  c.max_guesses = 3;
  const LookaheadSizer sizer(c);
  const std::vector<LookaheadShape> want = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 1}, {1, 2},
                                            {1, 3}, {2, 1}, {2, 2}, {2, 3}, {4, 1}, {4, 2},
                                            {4, 3}, {5, 1}, {5, 2}, {5, 3}};
  EXPECT_EQ(sizer.shapes(), want);
}

TEST(LookaheadSizerTest, StartsAtTheCaps) {
  LookaheadSizer sizer(Caps());
  const LookaheadSizingChoice choice = sizer.Choose(LinearVerifyCost(10.0));
  EXPECT_EQ(choice.shape, (LookaheadShape{8, 8}));
}

TEST(LookaheadSizerTest, ExpectedAcceptedIsTheBestVisibleGuess) {
  LookaheadSizingConfig c = Caps();
  c.forgetting = 1.0;
  LookaheadSizer sizer(c);
  // Rank 0: a prompt n-gram matching 1; rank 1: window column 3 matching 2.
  sizer.Observe(Step({-1, 3}, {1, 2}), 8);
  sizer.Observe(Step({-1, 3}, {0, 0}), 8);
  EXPECT_DOUBLE_EQ(sizer.ExpectedAccepted({0, 1}), 0.5);  // Only the prompt guess.
  EXPECT_DOUBLE_EQ(sizer.ExpectedAccepted({2, 8}), 0.5);  // Column 3 absent with W = 2.
  EXPECT_DOUBLE_EQ(sizer.ExpectedAccepted({4, 1}), 0.5);  // Rank 0 only.
  EXPECT_DOUBLE_EQ(sizer.ExpectedAccepted({4, 2}), 1.0);  // max(1, 2) then 0.
  // A narrower window that ran: shapes wider than it keep their estimate.
  sizer.Observe(Step({-1, 3}, {2, 2}), 2);
  EXPECT_DOUBLE_EQ(sizer.ExpectedAccepted({4, 2}), 1.0);
  EXPECT_DOUBLE_EQ(sizer.ExpectedAccepted({2, 2}), 1.0);  // (1 + 0 + 2) / 3.
}

TEST(LookaheadSizerTest, FlatCostTakesTheLargestShape) {
  LookaheadSizer sizer(Caps());
  ObserveRichPool(&sizer, 40);
  const LookaheadSizingChoice choice = sizer.Choose(LinearVerifyCost(0.0));
  EXPECT_EQ(choice.shape, (LookaheadShape{8, 8}));
  EXPECT_GT(choice.rate, 1.5);
}

TEST(LookaheadSizerTest, SteepCostTurnsItOff) {
  LookaheadSizer sizer(Caps());
  ObserveRichPool(&sizer, 40);
  // Every extra position costs half a plain step: 2 positions already cost 2 steps.
  const LookaheadSizingChoice choice = sizer.Choose(LinearVerifyCost(0.5));
  EXPECT_EQ(choice.shape, (LookaheadShape{0, 0}));
  EXPECT_DOUBLE_EQ(choice.rate, 1.0);
}

TEST(LookaheadSizerTest, GuessesFollowAcceptanceByRank) {
  LookaheadSizingConfig c = Caps();
  c.forgetting = 1.0;
  LookaheadSizer sizer(c);
  // Only the most recent guess (a committed n-gram) ever matches, fully, every other step.
  for (int i = 0; i < 40; ++i) {
    sizer.Observe(Step({-1, -1, -1, -1}, {i % 2 == 0 ? 2 : 0, 0, 0, 0}), 8);
  }
  // A moderate slope: rank 1 pays (2 tokens per 2 steps of 2 positions each at 0.05 ->
  // R = 2 / 1.1), more ranks and any window only add rows.
  const LookaheadSizingChoice choice = sizer.Choose(LinearVerifyCost(0.05));
  EXPECT_EQ(choice.shape, (LookaheadShape{0, 1}));
  EXPECT_NEAR(choice.rate, 2.0 / 1.1, 1e-9);
}

TEST(LookaheadSizerTest, WindowShrinksAsCostGrowsSteeper) {
  LookaheadSizingConfig c = Caps();
  c.max_guesses = 1;
  c.forgetting = 1.0;
  LookaheadSizer sizer(c);
  // The one guess of each step comes from window column 0 (half the steps), 1 (a
  // quarter), 3 or 7 (an eighth each) and always matches: B(w, 1) = 1, 1.5, 1.75, 2 for
  // w = 1, 2, 4, 8, so the first columns earn most.
  for (int i = 0; i < 64; ++i) {
    const int column = i % 16 < 8 ? 0 : (i % 16 < 12 ? 1 : (i % 16 < 14 ? 3 : 7));
    sizer.Observe(Step({column}, {2}), 8);
  }
  int previous = 9;
  for (double slope : {0.0, 0.01, 0.03, 0.06, 0.1}) {
    LookaheadSizer fresh = sizer;
    const LookaheadShape shape = fresh.Choose(LinearVerifyCost(slope)).shape;
    EXPECT_LE(shape.window, previous) << "slope " << slope;
    previous = shape.window;
  }
  EXPECT_EQ(LookaheadSizer(sizer).Choose(LinearVerifyCost(0.0)).shape.window, 8);
  EXPECT_LT(previous, 8);
}

// Shape changes over 40 steps whose cost slope alternates 0.023 / 0.027 around the
// slope (0.0263) at which 1 and 2 guesses are worth the same (B = 1 and 1.1).
int ChangesNearBoundary(double switch_margin) {
  LookaheadSizingConfig c = Caps();
  c.max_window = 1;
  c.max_guesses = 2;
  c.forgetting = 1.0;
  c.switch_margin = switch_margin;
  LookaheadSizer sizer(c);
  for (int i = 0; i < 50; ++i) sizer.Observe(Step({-1, -1}, {1, i % 10 == 0 ? 2 : 0}), 1);
  int changes = 0;
  LookaheadShape last = sizer.Choose(LinearVerifyCost(0.0)).shape;
  for (int step = 0; step < 40; ++step) {
    const double slope = step % 2 == 0 ? 0.023 : 0.027;
    const LookaheadShape shape = sizer.Choose(LinearVerifyCost(slope)).shape;
    changes += !(shape == last);
    last = shape;
  }
  return changes;
}

TEST(LookaheadSizerTest, HysteresisKeepsTheShapeNearABoundary) {
  EXPECT_LE(ChangesNearBoundary(0.05), 1);
  EXPECT_GE(ChangesNearBoundary(0.0), 30);  // Without it the shape flips every step.
}

TEST(LookaheadSizerTest, FixedValuesAreHonoured) {
  LookaheadSizingConfig c = Caps();
  c.fixed_window = true;
  c.fixed_guesses = true;
  LookaheadSizer sizer(c);
  ObserveRichPool(&sizer, 40);
  EXPECT_EQ(sizer.shapes().size(), 1u);
  EXPECT_EQ(sizer.Choose(LinearVerifyCost(1.0)).shape, (LookaheadShape{8, 8}));
  // A fixed W with G sized: the window stays at 8.
  c.fixed_guesses = false;
  LookaheadSizer guesses_only(c);
  ObserveRichPool(&guesses_only, 40);
  for (const LookaheadShape& s : guesses_only.shapes()) {
    EXPECT_TRUE(s.window == 8 || (s.window == 0 && s.guesses == 0));
  }
}

}  // namespace
}  // namespace spec
}  // namespace tandem
