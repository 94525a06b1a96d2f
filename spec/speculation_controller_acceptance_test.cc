// The controller's acceptance building blocks: per-position discounted counts
// (PositionAcceptance) and the expected tokens of a step from per-position acceptance.
#include <gtest/gtest.h>

#include <vector>

#include "spec/cost_model.h"
#include "spec/speculation_controller.h"

namespace tandem {
namespace spec {
namespace {

TEST(PositionAcceptanceTest, CountsTrialsUpToTheFirstRejection) {
  PositionAcceptance a(4, 1.0);
  a.Observe(4, 2);  // Positions 1, 2 accepted, 3 rejected, 4 never tried.
  a.Observe(2, 2);  // Both accepted.
  a.Observe(0, 0);  // Plain step: nothing.
  EXPECT_EQ(a.trials(1), 2);
  EXPECT_EQ(a.accepts(1), 2);
  EXPECT_EQ(a.trials(2), 2);
  EXPECT_EQ(a.accepts(2), 2);
  EXPECT_EQ(a.trials(3), 1);
  EXPECT_EQ(a.accepts(3), 0);
  EXPECT_EQ(a.trials(4), 0);
  EXPECT_EQ(a.trials(5), 0);  // Outside the tracked positions.
}

TEST(PositionAcceptanceTest, EvidenceAges) {
  PositionAcceptance a(2, 0.5);
  a.Observe(1, 1);
  a.Scale(0.5);
  EXPECT_DOUBLE_EQ(a.trials(1), 0.5);
  a.Observe(1, 0);  // Weighs the past by 0.5, then adds a trial.
  EXPECT_DOUBLE_EQ(a.trials(1), 1.25);
  EXPECT_DOUBLE_EQ(a.accepts(1), 0.25);
}

TEST(ExpectedTokensFromPositionsTest, MatchesTheConstantAlphaFormula) {
  for (double alpha : {0.0, 0.3, 0.8, 1.0}) {
    for (int k = 0; k <= 6; ++k) {
      EXPECT_NEAR(ExpectedTokensFromPositions(std::vector<double>(6, alpha), k),
                  ExpectedTokensPerStep(alpha, k), 1e-12);
    }
  }
  EXPECT_DOUBLE_EQ(ExpectedTokensFromPositions({0.5, 0.5}, 2), 1 + 0.5 + 0.25);
  EXPECT_DOUBLE_EQ(ExpectedTokensFromPositions({0.5, 2.0}, 5), 1 + 0.5 + 0.5);  // Clamped.
}

}  // namespace
}  // namespace spec
}  // namespace tandem
