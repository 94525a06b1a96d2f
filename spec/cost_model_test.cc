#include "spec/cost_model.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace spec {
namespace {

using ::testing::HasSubstr;

TEST(ExpectedTokensTest, HandComputedValues) {
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.5, 3), 1.875);   // (1 - 0.5^4) / 0.5
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.8, 4), 3.3616);  // (1 - 0.32768) / 0.2
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.8, 0), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.0, 5), 1.0);
  // alpha -> 1 limit is K + 1, continuous from below.
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(1.0, 4), 5.0);
  EXPECT_NEAR(ExpectedTokensPerStep(1.0 - 1e-12, 4), 5.0, 1e-9);
  // Out-of-range input is clamped.
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(1.5, 2), 3.0);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(-0.5, 2), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(std::nan(""), 2), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.5, -3), 1.0);
}

TEST(SpeedupTest, HandComputedValues) {
  // alpha 0.8, K 4, c 0.4, nu 1.1, o 0.05: E = 3.3616.
  EXPECT_NEAR(SequentialSpeedup(0.8, 4, 0.4, 1.1, 0.05), 3.3616 / 2.75, 1e-12);      // 1.22240
  EXPECT_NEAR(PipelinedSpeedupBound(0.8, 4, 0.4, 1.1, 0.05), 3.3616 / 1.65, 1e-12);  // 2.03733
  // When drafting is the cheaper side, the pipelined bound is limited by verify.
  EXPECT_NEAR(PipelinedSpeedupBound(0.8, 2, 0.4, 1.1, 0.05), 2.44 / 1.15, 1e-12);
  EXPECT_EQ(SequentialSpeedup(0.8, 0, 0.4, 1.1, 0.05), 1.0);
  EXPECT_EQ(PipelinedSpeedupBound(0.8, 0, 0.4, 1.1, 0.05), 1.0);
}

TEST(SpeedupTest, AGainNeedsAlphaAboveC) {
  // K = 1, nu = 1, o = 0: S = (1 + alpha) / (1 + c) > 1 iff alpha > c.
  EXPECT_GT(SequentialSpeedup(0.36, 1, 0.35, 1.0, 0.0), 1.0);
  EXPECT_LT(SequentialSpeedup(0.34, 1, 0.35, 1.0, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(SequentialSpeedup(0.35, 1, 0.35, 1.0, 0.0), 1.0);
}

TEST(VerifyCostTest, LinearAndTable) {
  const VerifyCostFn linear = LinearVerifyCost(0.02);
  EXPECT_DOUBLE_EQ(linear(0), 1.0);
  EXPECT_DOUBLE_EQ(linear(5), 1.1);
  const VerifyCostFn table = TableVerifyCost({1.0, 1.1, 1.3});
  EXPECT_DOUBLE_EQ(table(1), 1.1);
  EXPECT_DOUBLE_EQ(table(2), 1.3);
  EXPECT_DOUBLE_EQ(table(4), 1.7);  // Extends the last segment (slope 0.2).
  EXPECT_DOUBLE_EQ(TableVerifyCost({1.2})(9), 1.2);
  EXPECT_DOUBLE_EQ(TableVerifyCost({})(3), 1.0);
}

TEST(BestDraftLengthTest, HandComputedChoices) {
  CostModel cheap;
  cheap.draft_cost = 0.1;
  cheap.verify_cost = LinearVerifyCost(0.0);
  cheap.overhead = 0.0;
  // alpha 0.5: S(1..4) = 1.5/1.1, 1.75/1.2, 1.875/1.3, 1.9375/1.4 -> K = 2.
  DraftLengthChoice choice = BestDraftLength(0.5, cheap, 5, false);
  EXPECT_EQ(choice.k, 2);
  EXPECT_NEAR(choice.speedup, 1.75 / 1.2, 1e-12);
  // alpha 0.9, c 0.05: S still rises at K = 8 (6.12579511 / 1.4), so max_k wins.
  cheap.draft_cost = 0.05;
  choice = BestDraftLength(0.9, cheap, 8, false);
  EXPECT_EQ(choice.k, 8);
  EXPECT_NEAR(choice.speedup, 6.12579511 / 1.4, 1e-9);
  // Pipelined, c 0.3, nu 1: E / max(1, 0.3 K); K = 3 gives 2.952, K = 4 gives 2.80133.
  CostModel pipeline;
  pipeline.draft_cost = 0.3;
  pipeline.verify_cost = LinearVerifyCost(0.0);
  pipeline.overhead = 0.0;
  choice = BestDraftLength(0.8, pipeline, 8, true);
  EXPECT_EQ(choice.k, 3);
  EXPECT_NEAR(choice.speedup, 2.952, 1e-12);
  // Ties go to the smaller K: alpha 0 gives S = 1 / max(1, 0.3 K) = 1 for K = 1..3.
  EXPECT_EQ(BestDraftLength(0.0, pipeline, 8, true).k, 1);
  EXPECT_EQ(BestDraftLength(0.8, pipeline, 0, true).k, 0);
}

TEST(ValidateCostModelTest, NamesBadTerms) {
  EXPECT_TRUE(ValidateCostModel(CostModel(), 8).ok());
  const auto expect_bad = [](CostModel model, const char* term) {
    const absl::Status s = ValidateCostModel(model, 8);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << term;
    EXPECT_THAT(std::string(s.message()), HasSubstr(term));
  };
  CostModel c;
  c.draft_cost = -0.1;
  expect_bad(c, "draft_cost");
  c = CostModel();
  c.overhead = std::numeric_limits<double>::infinity();
  expect_bad(c, "overhead");
  c = CostModel();
  c.verify_cost = nullptr;
  expect_bad(c, "verify_cost");
  c = CostModel();
  c.verify_cost = TableVerifyCost({1.0, 0.0});
  expect_bad(c, "verify_cost(1)");
}

TEST(NodeValueThresholdTest, RateTimesTheCostOfOneMoreRow) {
  EXPECT_DOUBLE_EQ(NodeValueThreshold(1.5, LinearVerifyCost(0.2), 3), 1.5 * 0.2);
  // A table: the row after K = 1 costs 0.5, after K = 2 costs 0.1.
  const VerifyCostFn table = TableVerifyCost({1.0, 1.2, 1.7, 1.8});
  EXPECT_NEAR(NodeValueThreshold(2.0, table, 1), 1.0, 1e-12);
  EXPECT_NEAR(NodeValueThreshold(2.0, table, 2), 0.2, 1e-12);
  EXPECT_EQ(NodeValueThreshold(2.0, VerifyCostFn(), 2), 0.0);               // Unknown cost.
  EXPECT_EQ(NodeValueThreshold(2.0, TableVerifyCost({1.0, 0.9}), 0), 0.0);  // Never < 0.
}

}  // namespace
}  // namespace spec
}  // namespace tandem
