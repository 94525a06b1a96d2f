// ValidateRequest on sampling and acceptance-rule fields: temperature, top_k, top_p, the
// rule and its parameters (each rejection's code and message), the default rule for
// greedy, unseeded and seeded sampling, parameter defaults; ToSequenceSampling.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "coordinator/request_validation_test_fixture.h"

namespace tandem::coordinator {
namespace {

using tandem::v1::GenerateRequest;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
const auto kInvalid = absl::StatusCode::kInvalidArgument;

// Its own suite: request_validation_test.cc (same binary) instantiates RejectTest.
class SamplingRejectTest : public RejectTest {};

TEST_P(SamplingRejectTest, RejectedWithCodeAndMessage) { ExpectRejected(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    AllRules, SamplingRejectTest,
    ::testing::Values(
        // temperature
        RejectCase{"temperature_nan", [](auto& r) { r.mutable_sampling()->set_temperature(kNaN); },
                   kInvalid, "sampling.temperature = nan is out of range; valid range [0, 100]"},
        RejectCase{"temperature_inf", [](auto& r) { r.mutable_sampling()->set_temperature(kInf); },
                   kInvalid, "sampling.temperature = inf"},
        RejectCase{"temperature_negative",
                   [](auto& r) { r.mutable_sampling()->set_temperature(-0.5f); }, kInvalid,
                   "sampling.temperature = -0.5"},
        RejectCase{"temperature_over",
                   [](auto& r) { r.mutable_sampling()->set_temperature(100.5f); }, kInvalid,
                   "sampling.temperature = 100.5"},
        // top_k
        RejectCase{"top_k_negative", [](auto& r) { r.mutable_sampling()->set_top_k(-1); }, kInvalid,
                   "sampling.top_k = -1 is out of range; valid range [0, 100]"},
        RejectCase{"top_k_over_vocab", [](auto& r) { r.mutable_sampling()->set_top_k(101); },
                   kInvalid, "sampling.top_k = 101"},
        // top_p
        RejectCase{"top_p_zero", [](auto& r) { r.mutable_sampling()->set_top_p(0.0f); }, kInvalid,
                   "sampling.top_p = 0 is out of range; valid range (0, 1]"},
        RejectCase{"top_p_nan", [](auto& r) { r.mutable_sampling()->set_top_p(kNaN); }, kInvalid,
                   "sampling.top_p = nan"},
        RejectCase{"top_p_over", [](auto& r) { r.mutable_sampling()->set_top_p(1.01f); }, kInvalid,
                   "sampling.top_p = 1.01"},
        RejectCase{"top_p_negative", [](auto& r) { r.mutable_sampling()->set_top_p(-0.2f); },
                   kInvalid, "sampling.top_p = -0.2"},
        // rule
        RejectCase{"rule_unknown",
                   [](auto& r) {
                     r.mutable_speculation()->set_acceptance_rule(
                         static_cast<v1::AcceptanceRule>(9));
                   },
                   kInvalid, "speculation.acceptance_rule = 9 is not a known AcceptanceRule"},
        RejectCase{"greedy_with_temperature",
                   [](auto& r) {
                     r.mutable_sampling()->set_temperature(0.7f);
                     r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_GREEDY);
                   },
                   kInvalid, "ACCEPTANCE_RULE_GREEDY requires sampling.temperature = 0"},
        // rule parameters out of range
        RejectCase{"threshold_alpha_one",
                   [](auto& r) {
                     r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_THRESHOLD);
                     r.mutable_speculation()->set_alpha(1.0f);
                   },
                   kInvalid,
                   "speculation.alpha = 1 is out of range for ACCEPTANCE_RULE_THRESHOLD; valid "
                   "range (0, 1) (default 0.3)"},
        RejectCase{"threshold_alpha_zero",
                   [](auto& r) {
                     r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_THRESHOLD);
                     r.mutable_speculation()->set_alpha(0.0f);
                   },
                   kInvalid, "speculation.alpha = 0 is out of range"},
        RejectCase{"ratio_alpha_over",
                   [](auto& r) {
                     r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_RATIO);
                     r.mutable_speculation()->set_alpha(1.5f);
                   },
                   kInvalid, "for ACCEPTANCE_RULE_RATIO; valid range (0, 1] (default 0.5)"},
        RejectCase{"ratio_alpha_nan",
                   [](auto& r) {
                     r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_RATIO);
                     r.mutable_speculation()->set_alpha(kNaN);
                   },
                   kInvalid, "speculation.alpha = nan"},
        RejectCase{"theta_first_zero",
                   [](auto& r) {
                     r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_POSITION);
                     r.mutable_speculation()->set_theta_first(0.0f);
                   },
                   kInvalid, "speculation.theta_first = 0 is out of range"},
        RejectCase{"theta_last_over",
                   [](auto& r) {
                     r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_POSITION);
                     r.mutable_speculation()->set_theta_last(1.2f);
                   },
                   kInvalid, "speculation.theta_last = 1.2 is out of range"},
        RejectCase{"epsilon_zero",
                   [](auto& r) {
                     r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_TYPICAL);
                     r.mutable_speculation()->set_epsilon(0.0f);
                   },
                   kInvalid, "speculation.epsilon = 0 is out of range"},
        RejectCase{"delta_inf",
                   [](auto& r) {
                     r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_TYPICAL);
                     r.mutable_speculation()->set_delta(kInf);
                   },
                   kInvalid, "speculation.delta = inf is out of range"},
        // rule parameters without their rule
        RejectCase{"alpha_with_default_rule",
                   [](auto& r) { r.mutable_speculation()->set_alpha(0.4f); }, kInvalid,
                   "speculation.alpha is only used by ACCEPTANCE_RULE_THRESHOLD and "
                   "ACCEPTANCE_RULE_RATIO, but the acceptance rule is ACCEPTANCE_RULE_GREEDY"},
        RejectCase{"theta_with_threshold",
                   [](auto& r) {
                     r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_THRESHOLD);
                     r.mutable_speculation()->set_theta_first(0.9f);
                   },
                   kInvalid, "speculation.theta_first is only used by ACCEPTANCE_RULE_POSITION"},
        RejectCase{"epsilon_with_rejection",
                   [](auto& r) {
                     r.mutable_sampling()->set_temperature(1.0f);
                     r.mutable_speculation()->set_epsilon(0.1f);
                   },
                   kInvalid,
                   "speculation.epsilon is only used by ACCEPTANCE_RULE_TYPICAL, but the "
                   "acceptance rule is ACCEPTANCE_RULE_REJECTION"}),
    RejectCaseName);

TEST(ValidateRequestTest, UnseededSamplingDefaultsToRejectionRule) {
  GenerateRequest r = BaseRequest();
  r.mutable_sampling()->set_temperature(0.8f);
  absl::StatusOr<ValidatedRequest> v = Validate(r);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->speculation.rule, v1::ACCEPTANCE_RULE_REJECTION);
}

// tandem.proto's contract: a seeded request's output does not depend on method, K or
// load, which the coupled rule guarantees.
TEST(ValidateRequestTest, SeededSamplingDefaultsToCoupledRule) {
  for (v1::SpeculationMethod method :
       {v1::SPECULATION_METHOD_AUTO, v1::SPECULATION_METHOD_NONE, v1::SPECULATION_METHOD_DRAFT}) {
    GenerateRequest r = BaseRequest();
    r.mutable_sampling()->set_temperature(0.8f);
    r.mutable_sampling()->set_seed(0);  // Present, even if 0.
    r.mutable_speculation()->set_method(method);
    absl::StatusOr<ValidatedRequest> v = Validate(r);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->speculation.rule, v1::ACCEPTANCE_RULE_COUPLED);
    EXPECT_EQ(ToSequenceSampling(*v).rule(), v1::ACCEPTANCE_RULE_COUPLED);
  }
  GenerateRequest greedy = BaseRequest();
  greedy.mutable_sampling()->set_seed(5);
  absl::StatusOr<ValidatedRequest> v = Validate(greedy);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->speculation.rule, v1::ACCEPTANCE_RULE_GREEDY);
  EXPECT_EQ(DefaultAcceptanceRule(0.0f, true), v1::ACCEPTANCE_RULE_GREEDY);
  EXPECT_EQ(DefaultAcceptanceRule(0.5f, false), v1::ACCEPTANCE_RULE_REJECTION);
  EXPECT_EQ(DefaultAcceptanceRule(0.5f, true), v1::ACCEPTANCE_RULE_COUPLED);
}

TEST(ValidateRequestTest, CoupledRuleAtAnyTemperatureWithoutParameters) {
  for (float temperature : {0.0f, 1.0f}) {
    GenerateRequest r = BaseRequest();
    r.mutable_sampling()->set_temperature(temperature);
    r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_COUPLED);
    absl::StatusOr<ValidatedRequest> v = Validate(r);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->speculation.rule, v1::ACCEPTANCE_RULE_COUPLED);
    r.mutable_speculation()->set_alpha(0.3f);
    EXPECT_EQ(Validate(r).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ValidateRequestTest, RuleParameterDefaultsAndExplicitValues) {
  struct Case {
    v1::AcceptanceRule rule;
    float alpha, theta_first, theta_last, epsilon, delta;
  };
  const Case cases[] = {
      {v1::ACCEPTANCE_RULE_THRESHOLD, 0.3f, 0, 0, 0, 0},
      {v1::ACCEPTANCE_RULE_RATIO, 0.5f, 0, 0, 0, 0},
      {v1::ACCEPTANCE_RULE_POSITION, 0, 0.95f, 0.70f, 0, 0},
      {v1::ACCEPTANCE_RULE_TYPICAL, 0, 0, 0, 0.09f, 0.3f},
  };
  for (const Case& c : cases) {
    GenerateRequest r = BaseRequest();
    r.mutable_sampling()->set_temperature(1.0f);
    r.mutable_speculation()->set_acceptance_rule(c.rule);
    absl::StatusOr<ValidatedRequest> v = Validate(r);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->speculation.rule, c.rule);
    EXPECT_FLOAT_EQ(v->speculation.alpha, c.alpha) << c.rule;
    EXPECT_FLOAT_EQ(v->speculation.theta_first, c.theta_first) << c.rule;
    EXPECT_FLOAT_EQ(v->speculation.theta_last, c.theta_last) << c.rule;
    EXPECT_FLOAT_EQ(v->speculation.epsilon, c.epsilon) << c.rule;
    EXPECT_FLOAT_EQ(v->speculation.delta, c.delta) << c.rule;
  }
  GenerateRequest r = BaseRequest();
  r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_POSITION);
  r.mutable_speculation()->set_theta_first(1.0f);  // Closed upper bound.
  r.mutable_speculation()->set_theta_last(0.2f);
  absl::StatusOr<ValidatedRequest> v = Validate(r);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_FLOAT_EQ(v->speculation.theta_first, 1.0f);
  EXPECT_FLOAT_EQ(v->speculation.theta_last, 0.2f);
  r = BaseRequest();
  r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_RATIO);
  r.mutable_speculation()->set_alpha(1.0f);  // Ratio's bound is closed at 1.
  v = Validate(r);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_FLOAT_EQ(v->speculation.alpha, 1.0f);
}

TEST(ToSequenceSamplingTest, CopiesResolvedValues) {
  GenerateRequest r = BaseRequest();
  r.mutable_sampling()->set_temperature(0.6f);
  r.mutable_sampling()->set_top_k(40);
  r.mutable_sampling()->set_top_p(0.9f);
  r.mutable_sampling()->set_seed(77);
  r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_TYPICAL);
  r.mutable_speculation()->set_delta(0.4f);
  r.set_return_logprobs(true);
  absl::StatusOr<ValidatedRequest> v = Validate(r);
  ASSERT_TRUE(v.ok()) << v.status();
  const v1::SequenceSampling s = ToSequenceSampling(*v);
  EXPECT_FLOAT_EQ(s.temperature(), 0.6f);
  EXPECT_EQ(s.top_k(), 40);
  EXPECT_FLOAT_EQ(s.top_p(), 0.9f);
  EXPECT_EQ(s.seed(), 77u);
  EXPECT_EQ(s.rule(), v1::ACCEPTANCE_RULE_TYPICAL);
  EXPECT_FLOAT_EQ(s.epsilon(), 0.09f);
  EXPECT_FLOAT_EQ(s.delta(), 0.4f);
  EXPECT_EQ(s.alpha(), 0.0f);
  EXPECT_TRUE(s.return_logprobs());
}

}  // namespace
}  // namespace tandem::coordinator
