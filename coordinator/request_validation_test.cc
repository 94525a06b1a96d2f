// ValidateRequest on the request's shape: request_id, prompt, max_new_tokens, stop strings,
// speculation method, pipelining and K (each rejection's code and message), the resolved
// defaults and boundary values, the drawn seed and id; CheckPromptLength and
// ValidateServerLimits. Sampling and acceptance-rule validation:
// request_sampling_validation_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "coordinator/request_validation_test_fixture.h"

namespace tandem::coordinator {
namespace {

using tandem::v1::GenerateRequest;
using ::testing::HasSubstr;

const auto kInvalid = absl::StatusCode::kInvalidArgument;

TEST_P(RejectTest, RejectedWithCodeAndMessage) { ExpectRejected(GetParam()); }

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
        // K
        RejectCase{"k_negative",
                   [](auto& r) { r.mutable_speculation()->set_num_speculative_tokens(-1); },
                   kInvalid, "num_speculative_tokens = -1 is out of range; valid range [0, 8]"},
        RejectCase{"k_over",
                   [](auto& r) { r.mutable_speculation()->set_num_speculative_tokens(9); },
                   kInvalid, "num_speculative_tokens = 9 is out of range"},
        RejectCase{"tree_nodes_over",
                   [](auto& r) { r.mutable_speculation()->set_draft_tree_nodes(17); }, kInvalid,
                   "draft_tree_nodes = 17 is out of range; valid range [0, 16]"},
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
            "SPECULATION_METHOD_PROMPT_LOOKUP"}),
    RejectCaseName);

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

// The model's generation_config.json top_p applies where the request leaves top_p unset.
TEST(ValidateRequestTest, UnsetTopPTakesTheServerDefault) {
  ServerLimits limits = TestLimits();
  limits.sampling_defaults.top_p = 0.9f;
  GenerateRequest r = BaseRequest();
  r.mutable_sampling()->set_temperature(0.7f);
  absl::StatusOr<ValidatedRequest> v = Validate(r, limits);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->sampling.top_p, 0.9f);
  r.mutable_sampling()->set_top_p(0.5f);
  v = Validate(r, limits);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->sampling.top_p, 0.5f);
}

// A model that samples by default (Llama-3 Instruct / Qwen3 style generation_config.json):
// an unset temperature and top_k take its values, and the default acceptance rule sees
// the resolved temperature; an explicit 0 still means greedy and no top-k limit.
TEST(ValidateRequestTest, UnsetTemperatureAndTopKTakeASamplingModelsDefaults) {
  SamplingDefaults config;
  config.do_sample = true;
  config.temperature = 0.6f;
  config.top_k = 20;
  ServerLimits limits = TestLimits();
  limits.sampling_defaults = RequestSamplingDefaultsFrom(config);
  GenerateRequest r = BaseRequest();
  absl::StatusOr<ValidatedRequest> v = Validate(r, limits);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->sampling.temperature, 0.6f);
  EXPECT_EQ(v->sampling.top_k, 20);
  EXPECT_EQ(v->speculation.rule, v1::ACCEPTANCE_RULE_REJECTION);
  r.mutable_sampling()->set_seed(3);  // Seeded: the output contract's coupled rule.
  v = Validate(r, limits);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->speculation.rule, v1::ACCEPTANCE_RULE_COUPLED);
  EXPECT_EQ(ToSequenceSampling(*v).temperature(), 0.6f);
  // The greedy rule checks the resolved temperature.
  r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_GREEDY);
  EXPECT_THAT(std::string(Validate(r, limits).status().message()),
              HasSubstr("requires sampling.temperature = 0 (got 0.6)"));
  r.mutable_sampling()->set_temperature(0.0f);  // Explicit 0: greedy.
  r.mutable_sampling()->set_top_k(0);           // Explicit 0: no limit.
  v = Validate(r, limits);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->sampling.temperature, 0.0f);
  EXPECT_EQ(v->sampling.top_k, 0);
  EXPECT_EQ(v->speculation.rule, v1::ACCEPTANCE_RULE_GREEDY);
}

// The bundled models' {"do_sample": false} and a model that states nothing: a request
// that sets nothing is greedy; one that sets a temperature samples with the model's top_k.
TEST(ValidateRequestTest, UnsetTemperatureIsGreedyUnlessTheModelSamples) {
  SamplingDefaults greedy_config;
  greedy_config.do_sample = false;
  greedy_config.temperature = 0.9f;  // Ignored, as Hugging Face ignores it.
  greedy_config.top_k = 7;
  for (const ServerLimits& limits : {TestLimits(), [&] {
                                       ServerLimits l = TestLimits();
                                       l.sampling_defaults =
                                           RequestSamplingDefaultsFrom(greedy_config);
                                       return l;
                                     }()}) {
    GenerateRequest r = BaseRequest();
    absl::StatusOr<ValidatedRequest> v = Validate(r, limits);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->sampling.temperature, 0.0f);
    EXPECT_EQ(v->speculation.rule, v1::ACCEPTANCE_RULE_GREEDY);
    r.mutable_sampling()->set_temperature(0.8f);
    v = Validate(r, limits);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->sampling.temperature, 0.8f);
    EXPECT_EQ(v->sampling.top_k, limits.sampling_defaults.top_k);
  }
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
  limits = TestLimits();
  limits.sampling_defaults.top_p = 0.0f;
  EXPECT_THAT(std::string(ValidateServerLimits(limits).message()),
              HasSubstr("server limits: sampling defaults: top_p = 0"));
  EXPECT_FALSE(ValidateServerLimits(ServerLimits{}).ok());  // No context or vocabulary.
}

}  // namespace
}  // namespace tandem::coordinator
