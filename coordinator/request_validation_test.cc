#include "coordinator/request_validation.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

using tandem::v1::GenerateRequest;
using ::testing::HasSubstr;
namespace v1 = tandem::v1;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

ServerLimits TestLimits() {
  ServerLimits limits;
  limits.context_length = 64;
  limits.vocab_size = 100;
  return limits;  // Other limits at their defaults (4096, 128, 8, 1 MiB, 8, 256, 128).
}

GenerateRequest BaseRequest() {
  GenerateRequest r;
  r.set_text("Hello");
  return r;
}

absl::StatusOr<ValidatedRequest> Validate(const GenerateRequest& r,
                                          const ServerLimits& limits = TestLimits()) {
  std::mt19937_64 rng(99);
  return ValidateRequest(r, limits, rng);
}

struct RejectCase {
  const char* name;
  std::function<void(GenerateRequest&)> mutate;
  absl::StatusCode code;
  const char* message_part;
};

class RejectTest : public ::testing::TestWithParam<RejectCase> {};

TEST_P(RejectTest, RejectedWithCodeAndMessage) {
  const RejectCase& c = GetParam();
  GenerateRequest r = BaseRequest();
  c.mutate(r);
  absl::StatusOr<ValidatedRequest> result = Validate(r);
  ASSERT_FALSE(result.ok()) << c.name;
  EXPECT_EQ(result.status().code(), c.code) << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(c.message_part));
}

const auto kInvalid = absl::StatusCode::kInvalidArgument;

INSTANTIATE_TEST_SUITE_P(
    AllRules, RejectTest,
    ::testing::Values(
        // request_id
        RejectCase{"id_too_long", [](auto& r) { r.set_request_id(std::string(129, 'a')); },
                   kInvalid, "request_id: 129 characters is too long; at most 128"},
        RejectCase{"id_control_char", [](auto& r) { r.set_request_id("ab\ncd"); }, kInvalid,
                   "request_id: byte 2 (0x0a) is not printable ASCII"},
        RejectCase{"id_non_ascii", [](auto& r) { r.set_request_id("caf\xC3\xA9"); }, kInvalid,
                   "not printable ASCII"},
        // prompt
        RejectCase{"prompt_missing", [](auto& r) { r.clear_prompt(); }, kInvalid,
                   "prompt: missing; set either text"},
        RejectCase{"text_empty", [](auto& r) { r.set_text(""); }, kInvalid,
                   "text: the prompt is empty; it must be 1 .. 1048576 bytes"},
        RejectCase{"text_too_large", [](auto& r) { r.set_text(std::string((1 << 20) + 1, 'x')); },
                   kInvalid, "1048577 bytes; at most 1048576"},
        RejectCase{"text_bad_utf8", [](auto& r) { r.set_text("ok\xC3("); }, kInvalid,
                   "text: the prompt is not valid UTF-8 (invalid byte 0xc3 at byte offset 2)"},
        RejectCase{"text_surrogate", [](auto& r) { r.set_text("\xED\xA0\x80"); }, kInvalid,
                   "not valid UTF-8"},
        RejectCase{"ids_empty", [](auto& r) { r.mutable_token_ids(); }, kInvalid,
                   "token_ids.ids: the prompt is empty; it must have 1 .. 63"},
        RejectCase{"id_negative",
                   [](auto& r) {
                     r.mutable_token_ids()->add_ids(5);
                     r.mutable_token_ids()->add_ids(-1);
                   },
                   kInvalid, "token_ids.ids[1] = -1 is outside [0, 100)"},
        RejectCase{"id_equals_vocab", [](auto& r) { r.mutable_token_ids()->add_ids(100); },
                   kInvalid, "token_ids.ids[0] = 100 is outside [0, 100)"},
        RejectCase{"ids_fill_context",
                   [](auto& r) {
                     for (int i = 0; i < 64; ++i) r.mutable_token_ids()->add_ids(1);
                   },
                   kInvalid, "has 64 tokens; at most context_length - 1 = 63"},
        // max_new_tokens
        RejectCase{"max_new_tokens_over", [](auto& r) { r.set_max_new_tokens(4097); }, kInvalid,
                   "max_new_tokens = 4097 is over the server limit 4096; valid range [1, 4096]"},
        // stop strings
        RejectCase{"too_many_stops",
                   [](auto& r) {
                     for (int i = 0; i < 9; ++i) r.add_stop("s");
                   },
                   kInvalid, "stop: 9 stop strings; at most 8"},
        RejectCase{"stop_empty", [](auto& r) { r.add_stop(""); }, kInvalid,
                   "stop[0]: 0 bytes; each stop string must be 1 .. 256 bytes"},
        RejectCase{"stop_too_long", [](auto& r) { r.add_stop(std::string(257, 'z')); }, kInvalid,
                   "stop[0]: 257 bytes"},
        RejectCase{"stop_bad_utf8",
                   [](auto& r) {
                     r.add_stop("ok");
                     r.add_stop("\xFF");
                   },
                   kInvalid, "stop[1]: not valid UTF-8"},
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
        // K
        RejectCase{"k_negative",
                   [](auto& r) { r.mutable_speculation()->set_num_speculative_tokens(-1); },
                   kInvalid, "num_speculative_tokens = -1 is out of range; valid range [0, 8]"},
        RejectCase{"k_over",
                   [](auto& r) { r.mutable_speculation()->set_num_speculative_tokens(9); },
                   kInvalid, "num_speculative_tokens = 9 is out of range"},
        RejectCase{"k_with_method_none",
                   [](auto& r) {
                     r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_NONE);
                     r.mutable_speculation()->set_num_speculative_tokens(3);
                   },
                   kInvalid, "contradicts speculation.method = SPECULATION_METHOD_NONE"},
        // method
        RejectCase{"method_unknown",
                   [](auto& r) {
                     r.mutable_speculation()->set_method(static_cast<v1::SpeculationMethod>(17));
                   },
                   kInvalid, "speculation.method = 17 is not a known SpeculationMethod"},
        RejectCase{"pipelining_unknown",
                   [](auto& r) {
                     r.mutable_speculation()->set_pipelining(static_cast<v1::Pipelining>(9));
                   },
                   kInvalid, "speculation.pipelining = 9 is not a known Pipelining value"},
        RejectCase{
            "method_not_enabled",
            [](auto& r) { r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_MEDUSA); },
            absl::StatusCode::kFailedPrecondition,
            "SPECULATION_METHOD_MEDUSA is not enabled on this server; enabled methods: "
            "SPECULATION_METHOD_AUTO, SPECULATION_METHOD_NONE, SPECULATION_METHOD_DRAFT, "
            "SPECULATION_METHOD_PROMPT_LOOKUP"},
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
    [](const ::testing::TestParamInfo<RejectCase>& info) { return std::string(info.param.name); });

TEST(ValidateRequestTest, DefaultsResolved) {
  absl::StatusOr<ValidatedRequest> v = Validate(BaseRequest());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->request_id_assigned);
  EXPECT_THAT(v->request_id, ::testing::MatchesRegex("req-[0-9a-f]{16}"));
  EXPECT_TRUE(v->prompt_is_text);
  EXPECT_EQ(v->prompt_text, "Hello");
  EXPECT_EQ(v->max_new_tokens, 128);
  EXPECT_TRUE(v->stop.empty());
  EXPECT_EQ(v->sampling.temperature, 0.0f);
  EXPECT_EQ(v->sampling.top_k, 0);
  EXPECT_EQ(v->sampling.top_p, 1.0f);
  EXPECT_FALSE(v->sampling.seed_from_request);
  EXPECT_EQ(v->speculation.method, v1::SPECULATION_METHOD_AUTO);
  EXPECT_FALSE(v->speculation.fixed_k.has_value());
  EXPECT_EQ(v->speculation.rule, v1::ACCEPTANCE_RULE_GREEDY);
  EXPECT_EQ(v->speculation.alpha, 0.0f);
  EXPECT_FALSE(v->return_token_ids || v->return_logprobs || v->ignore_eos);
}

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

TEST(ValidateRequestTest, BoundaryValuesAccepted) {
  GenerateRequest r;
  r.set_request_id(std::string(127, 'x') + " ");
  for (int i = 0; i < 63; ++i) r.mutable_token_ids()->add_ids(i % 100 == 0 ? 99 : i);
  r.set_max_new_tokens(4096);
  for (int i = 0; i < 8; ++i) r.add_stop(i == 0 ? std::string(256, 's') : "\xE2\x82\xAC");
  r.mutable_sampling()->set_temperature(100.0f);
  r.mutable_sampling()->set_top_k(100);
  r.mutable_sampling()->set_top_p(1.0f);
  r.mutable_sampling()->set_seed(12345);
  r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_PROMPT_LOOKUP);
  r.mutable_speculation()->set_num_speculative_tokens(8);
  r.set_return_token_ids(true);
  r.set_return_logprobs(true);
  r.set_ignore_eos(true);
  absl::StatusOr<ValidatedRequest> v = Validate(r);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_FALSE(v->request_id_assigned);
  EXPECT_EQ(v->request_id, r.request_id());
  EXPECT_FALSE(v->prompt_is_text);
  EXPECT_EQ(v->prompt_token_ids.size(), 63u);
  EXPECT_EQ(v->prompt_token_ids[0], 99);
  EXPECT_EQ(v->max_new_tokens, 4096);
  EXPECT_EQ(v->stop.size(), 8u);
  EXPECT_EQ(v->sampling.seed, 12345u);
  EXPECT_TRUE(v->sampling.seed_from_request);
  EXPECT_EQ(v->sampling.top_k, 100);
  EXPECT_EQ(v->speculation.method, v1::SPECULATION_METHOD_PROMPT_LOOKUP);
  EXPECT_EQ(v->speculation.fixed_k, 8);
  EXPECT_EQ(v->speculation.rule, v1::ACCEPTANCE_RULE_COUPLED);  // Seeded: the default.
  EXPECT_TRUE(v->return_token_ids && v->return_logprobs && v->ignore_eos);
}

TEST(ValidateRequestTest, FixedKZeroMeansNoSpeculation) {
  GenerateRequest r = BaseRequest();
  r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_DRAFT);
  r.mutable_speculation()->set_num_speculative_tokens(0);
  absl::StatusOr<ValidatedRequest> v = Validate(r);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->speculation.method, v1::SPECULATION_METHOD_NONE);
  EXPECT_EQ(v->speculation.fixed_k, 0);
}

TEST(ValidateRequestTest, MethodEnabledByLimits) {
  GenerateRequest r = BaseRequest();
  r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_LOOKAHEAD);
  EXPECT_EQ(Validate(r).status().code(), absl::StatusCode::kFailedPrecondition);
  ServerLimits limits = TestLimits();
  limits.available_methods.insert(v1::SPECULATION_METHOD_LOOKAHEAD);
  absl::StatusOr<ValidatedRequest> v = Validate(r, limits);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->speculation.method, v1::SPECULATION_METHOD_LOOKAHEAD);
  // A server without a draft worker rejects DRAFT but still accepts AUTO and NONE.
  limits.available_methods.clear();
  r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_DRAFT);
  EXPECT_EQ(Validate(r, limits).status().code(), absl::StatusCode::kFailedPrecondition);
  r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_NONE);
  EXPECT_TRUE(Validate(r, limits).ok());
}

TEST(ValidateRequestTest, DrawnSeedAndIdComeFromTheRandomSource) {
  std::mt19937_64 a(5), b(5), c(6);
  absl::StatusOr<ValidatedRequest> va = ValidateRequest(BaseRequest(), TestLimits(), a);
  absl::StatusOr<ValidatedRequest> vb = ValidateRequest(BaseRequest(), TestLimits(), b);
  absl::StatusOr<ValidatedRequest> vc = ValidateRequest(BaseRequest(), TestLimits(), c);
  ASSERT_TRUE(va.ok() && vb.ok() && vc.ok());
  EXPECT_EQ(va->sampling.seed, vb->sampling.seed);
  EXPECT_EQ(va->request_id, vb->request_id);
  EXPECT_NE(va->sampling.seed, vc->sampling.seed);
  EXPECT_NE(va->request_id, vc->request_id);
  // The overload with its own generator draws different seeds on each call.
  absl::StatusOr<ValidatedRequest> d1 = ValidateRequest(BaseRequest(), TestLimits());
  absl::StatusOr<ValidatedRequest> d2 = ValidateRequest(BaseRequest(), TestLimits());
  ASSERT_TRUE(d1.ok() && d2.ok());
  EXPECT_NE(d1->sampling.seed, d2->sampling.seed);
}

TEST(CheckPromptLengthTest, ClampsToRoomLeftAndRejectsFullPrompts) {
  const ServerLimits limits = TestLimits();  // context 64
  EXPECT_EQ(*CheckPromptLength(10, 20, limits), 20);
  EXPECT_EQ(*CheckPromptLength(50, 20, limits), 14);
  EXPECT_EQ(*CheckPromptLength(63, 128, limits), 1);
  absl::StatusOr<int> full = CheckPromptLength(64, 1, limits);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(full.status().message()),
              HasSubstr("64 tokens leave no room in the context of 64 tokens; at most 63"));
  EXPECT_EQ(CheckPromptLength(0, 5, limits).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckPromptLength(5, 0, limits).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServerLimitsTest, Validation) {
  EXPECT_TRUE(ValidateServerLimits(TestLimits()).ok());
  ServerLimits limits = TestLimits();
  limits.context_length = 1;
  EXPECT_THAT(std::string(ValidateServerLimits(limits).message()), HasSubstr("context_length"));
  limits = TestLimits();
  limits.vocab_size = 0;
  EXPECT_FALSE(ValidateServerLimits(limits).ok());
  limits = TestLimits();
  limits.default_max_new_tokens = 5000;
  EXPECT_THAT(std::string(ValidateServerLimits(limits).message()),
              HasSubstr("default_max_new_tokens"));
  EXPECT_FALSE(ValidateServerLimits(ServerLimits{}).ok());  // No context or vocabulary.
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
