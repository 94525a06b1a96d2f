#include "spec/acceptance_params.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace spec {
namespace {

using ::testing::HasSubstr;

AcceptanceParams Rule(AcceptanceRule rule) {
  AcceptanceParams params;
  params.rule = rule;
  return params;
}

TEST(AcceptanceParamsTest, NamesRoundTripAndDefaults) {
  for (AcceptanceRule rule :
       {AcceptanceRule::kGreedy, AcceptanceRule::kRejection, AcceptanceRule::kThreshold,
        AcceptanceRule::kRatio, AcceptanceRule::kPosition, AcceptanceRule::kTypical,
        AcceptanceRule::kCoupled}) {
    absl::StatusOr<AcceptanceRule> parsed = ParseAcceptanceRule(AcceptanceRuleName(rule));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, rule);
  }
  EXPECT_EQ(ParseAcceptanceRule("medusa").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AlphaOrDefault(Rule(AcceptanceRule::kThreshold)), 0.3f);
  EXPECT_EQ(AlphaOrDefault(Rule(AcceptanceRule::kRatio)), 0.5f);
  AcceptanceParams set = Rule(AcceptanceRule::kRatio);
  set.alpha = 0.8f;
  EXPECT_EQ(AlphaOrDefault(set), 0.8f);
  const AcceptanceParams defaults;
  EXPECT_EQ(defaults.theta_first, 0.95f);
  EXPECT_EQ(defaults.theta_last, 0.70f);
  EXPECT_EQ(defaults.epsilon, 0.09f);
  EXPECT_EQ(defaults.delta, 0.3f);
}

TEST(AcceptanceParamsTest, ValidationChecksRangesOfTheRuleItsParameters) {
  for (AcceptanceRule rule :
       {AcceptanceRule::kRejection, AcceptanceRule::kThreshold, AcceptanceRule::kRatio,
        AcceptanceRule::kPosition, AcceptanceRule::kTypical}) {
    EXPECT_TRUE(ValidateAcceptanceParams(Rule(rule), 0.8f).ok()) << AcceptanceRuleName(rule);
  }
  EXPECT_TRUE(ValidateAcceptanceParams(Rule(AcceptanceRule::kGreedy), 0.0f).ok());

  struct Bad {
    AcceptanceParams params;
    const char* field;
  };
  std::vector<Bad> bad;
  const auto with = [](AcceptanceRule rule, auto edit) {
    AcceptanceParams p = Rule(rule);
    edit(p);
    return p;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  bad.push_back({with(AcceptanceRule::kThreshold, [](auto& p) { p.alpha = 0.0f; }), "alpha"});
  bad.push_back({with(AcceptanceRule::kThreshold, [](auto& p) { p.alpha = 1.0f; }), "alpha"});
  bad.push_back({with(AcceptanceRule::kRatio, [](auto& p) { p.alpha = 0.0f; }), "alpha"});
  bad.push_back({with(AcceptanceRule::kRatio, [&](auto& p) { p.alpha = nan; }), "alpha"});
  bad.push_back(
      {with(AcceptanceRule::kPosition, [](auto& p) { p.theta_first = 1.5f; }), "theta_first"});
  bad.push_back(
      {with(AcceptanceRule::kPosition, [](auto& p) { p.theta_last = 0.0f; }), "theta_last"});
  bad.push_back({with(AcceptanceRule::kTypical, [](auto& p) { p.epsilon = -0.1f; }), "epsilon"});
  bad.push_back({with(AcceptanceRule::kTypical, [](auto& p) { p.delta = 2.0f; }), "delta"});
  for (const Bad& b : bad) {
    const absl::Status s = ValidateAcceptanceParams(b.params, 1.0f);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.field;
    EXPECT_THAT(std::string(s.message()), HasSubstr(b.field));
  }
  // Ratio allows alpha = 1, threshold does not; position parameters need no order.
  AcceptanceParams ratio_one = Rule(AcceptanceRule::kRatio);
  ratio_one.alpha = 1.0f;
  EXPECT_TRUE(ValidateAcceptanceParams(ratio_one, 1.0f).ok());
  AcceptanceParams rising = Rule(AcceptanceRule::kPosition);
  rising.theta_first = 0.5f;
  rising.theta_last = 1.0f;
  EXPECT_TRUE(ValidateAcceptanceParams(rising, 1.0f).ok());
  // Unused parameters are not checked; greedy needs temperature 0.
  AcceptanceParams greedy = Rule(AcceptanceRule::kGreedy);
  greedy.epsilon = 7.0f;
  EXPECT_TRUE(ValidateAcceptanceParams(greedy, 0.0f).ok());
  EXPECT_THAT(std::string(ValidateAcceptanceParams(greedy, 0.5f).message()),
              HasSubstr("temperature"));
}

TEST(RuleThresholdsTest, PositionFallsLinearlyAndTypicalIsCappedByEpsilon) {
  EXPECT_DOUBLE_EQ(PositionThreshold(0, 4, 0.9f, 0.5f), static_cast<double>(0.9f));
  EXPECT_DOUBLE_EQ(PositionThreshold(4, 4, 0.9f, 0.5f), static_cast<double>(0.5f));
  EXPECT_NEAR(PositionThreshold(2, 4, 0.9f, 0.5f), 0.7, 1e-7);
  // Uniform over 4 tokens: H = ln 4, so delta * exp(-H) = delta / 4.
  const std::vector<float> uniform(4, 0.25f);
  EXPECT_NEAR(TypicalThreshold(uniform, 0.5f, 0.4f), 0.1, 1e-6);
  EXPECT_NEAR(TypicalThreshold(uniform, 0.05f, 0.4f), 0.05, 1e-7);
  // One-hot: H = 0, the bound is min(epsilon, delta).
  EXPECT_NEAR(TypicalThreshold(std::vector<float>{0, 1, 0}, 0.09f, 0.3f), 0.09, 1e-7);
}

TEST(ParamRangeTest, OpenAndClosedEndsAndNonFiniteValues) {
  EXPECT_FALSE(kThresholdAlphaRange.Contains(0.0f));
  EXPECT_TRUE(kThresholdAlphaRange.Contains(0.5f));
  EXPECT_FALSE(kThresholdAlphaRange.Contains(1.0f));
  EXPECT_TRUE(kRatioAlphaRange.Contains(1.0f));
  EXPECT_FALSE(kProbabilityParamRange.Contains(std::nanf("")));
  EXPECT_FALSE(kProbabilityParamRange.Contains(std::numeric_limits<float>::infinity()));
  const ParamRange closed{-2.0f, true, 3.5f, true};
  EXPECT_TRUE(closed.Contains(-2.0f));
  EXPECT_TRUE(closed.Contains(3.5f));
  EXPECT_FALSE(closed.Contains(3.6f));
  EXPECT_EQ(kThresholdAlphaRange.Text(), "(0, 1)");
  EXPECT_EQ(kRatioAlphaRange.Text(), "(0, 1]");
  EXPECT_EQ(closed.Text(), "[-2, 3.5]");
}

}  // namespace
}  // namespace spec
}  // namespace tandem
