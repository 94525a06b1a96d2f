// OpenAI-compatible request bodies: the GenerateRequest each becomes, and a clear
// INVALID_ARGUMENT naming the field for every kind of bad input.
#include "coordinator/openai_request.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace tandem::coordinator {
namespace {

constexpr OpenAiEndpoint kCompletions = OpenAiEndpoint::kCompletions;
constexpr OpenAiEndpoint kChat = OpenAiEndpoint::kChatCompletions;

OpenAiRequest Parse(OpenAiEndpoint endpoint, const std::string& body) {
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(endpoint, body);
  EXPECT_TRUE(r.ok()) << r.status() << " for " << body;
  return r.ok() ? *r : OpenAiRequest{};
}

// The refusal of `body`: INVALID_ARGUMENT naming `param`, its message containing `text`.
void ExpectRefused(OpenAiEndpoint endpoint, const std::string& body, const std::string& param,
                   const std::string& text) {
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(endpoint, body);
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
  EXPECT_EQ(ParamOf(r.status()), param) << r.status();
  EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status();
}

TEST(OpenAiRequestTest, CompletionWithOpenAiDefaults) {
  OpenAiRequest r = Parse(kCompletions, R"({"model": "target", "prompt": "def f():"})");
  EXPECT_EQ(r.model, "target");
  EXPECT_EQ(r.generate.text(), "def f():");
  EXPECT_EQ(r.generate.max_new_tokens(), 16u);
  // Omitted sampling fields stay unset: the model's defaults, then OpenAI's, apply.
  EXPECT_FALSE(r.generate.sampling().has_temperature());
  EXPECT_FALSE(r.generate.sampling().has_top_k());
  EXPECT_FALSE(r.generate.sampling().has_top_p());
  EXPECT_FALSE(r.generate.sampling().has_seed());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
}

// An omitted temperature: the model's default (greedy for {"do_sample": false}, 0.6 for
// Llama-3 Instruct), else OpenAI's 1; a temperature the body gives is kept, 0 included.
TEST(OpenAiRequestTest, OmittedTemperatureTakesTheModelsElseOpenAisDefault) {
  const char* omitted = R"({"model": "m", "prompt": "x"})";
  RequestSamplingDefaults none, greedy, warm;
  greedy.temperature = 0.0f;
  warm.temperature = 0.6f;
  for (const auto& [defaults, expected] :
       {std::pair{none, 1.0f}, std::pair{greedy, 0.0f}, std::pair{warm, 0.6f}}) {
    OpenAiRequest r = Parse(kCompletions, omitted);
    ApplyOpenAiTemperatureDefault(defaults, &r.generate);
    ASSERT_TRUE(r.generate.sampling().has_temperature());
    EXPECT_FLOAT_EQ(r.generate.sampling().temperature(), expected);
    EXPECT_FALSE(r.generate.sampling().has_top_k());  // Resolved by validation.
  }
  OpenAiRequest r = Parse(kCompletions, R"({"model": "m", "prompt": "x", "temperature": 0})");
  ApplyOpenAiTemperatureDefault(warm, &r.generate);
  EXPECT_FLOAT_EQ(r.generate.sampling().temperature(), 0.0f);
}

TEST(OpenAiRequestTest, CompletionFields) {
  OpenAiRequest r = Parse(kCompletions, R"({"model": "m", "prompt": ["x"], "max_tokens": 5,
      "temperature": 0, "top_p": 0.5, "top_k": 7, "seed": 42, "stop": ["\n", "END"],
      "stream": true, "stream_options": {"include_usage": true}, "logprobs": 0,
      "ignore_eos": true, "n": 1, "user": "u", "presence_penalty": 0})");
  EXPECT_EQ(r.generate.text(), "x");
  EXPECT_EQ(r.generate.max_new_tokens(), 5u);
  EXPECT_FLOAT_EQ(r.generate.sampling().temperature(), 0.0f);
  EXPECT_FLOAT_EQ(r.generate.sampling().top_p(), 0.5f);
  EXPECT_EQ(r.generate.sampling().top_k(), 7);
  EXPECT_EQ(r.generate.sampling().seed(), 42u);
  ASSERT_EQ(r.generate.stop_size(), 2);
  EXPECT_EQ(r.generate.stop(1), "END");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_TRUE(r.generate.return_logprobs());
  EXPECT_TRUE(r.generate.return_token_ids());
  EXPECT_TRUE(r.generate.ignore_eos());
}

TEST(OpenAiRequestTest, TokenIdPrompts) {
  for (const char* prompt : {"[1, 5, 9]", "[[1, 5, 9]]"}) {
    OpenAiRequest r =
        Parse(kCompletions, absl::StrCat(R"({"model": "m", "prompt": )", prompt, "}"));
    ASSERT_EQ(r.generate.token_ids().ids_size(), 3) << prompt;
    EXPECT_EQ(r.generate.token_ids().ids(2), 9);
  }
}

TEST(OpenAiRequestTest, SpeculationExtensionTakesShortAndProtoNames) {
  OpenAiRequest r = Parse(kCompletions, R"({"model": "m", "prompt": "p", "speculation":
      {"method": "draft", "num_speculative_tokens": 3, "acceptance_rule": "greedy"}})");
  EXPECT_EQ(r.generate.speculation().method(), v1::SPECULATION_METHOD_DRAFT);
  EXPECT_EQ(r.generate.speculation().num_speculative_tokens(), 3);
  EXPECT_EQ(r.generate.speculation().acceptance_rule(), v1::ACCEPTANCE_RULE_GREEDY);
  r = Parse(kCompletions, R"({"model": "m", "prompt": "p", "speculation":
      {"method": "SPECULATION_METHOD_PROMPT_LOOKUP", "pipelining": "off"}})");
  EXPECT_EQ(r.generate.speculation().method(), v1::SPECULATION_METHOD_PROMPT_LOOKUP);
  EXPECT_EQ(r.generate.speculation().pipelining(), v1::PIPELINING_OFF);
}

TEST(OpenAiRequestTest, ChatMessages) {
  OpenAiRequest r = Parse(kChat, R"({"model": "m", "messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                   {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": null},
      {"role": "user", "content": "again"}], "max_completion_tokens": 9, "logprobs": true})");
  ASSERT_EQ(r.generate.chat().messages_size(), 4);
  EXPECT_EQ(r.generate.chat().messages(0).role(), "system");
  EXPECT_EQ(r.generate.chat().messages(1).content(), "Hi there");
  EXPECT_EQ(r.generate.chat().messages(2).role(), "assistant");
  EXPECT_EQ(r.generate.chat().messages(2).content(), "");
  EXPECT_EQ(r.generate.max_new_tokens(), 9u);
  EXPECT_TRUE(r.generate.return_logprobs());
  // Chat's default length is the server's (0).
  EXPECT_EQ(Parse(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})")
                .generate.max_new_tokens(),
            0u);
}

TEST(OpenAiRequestTest, MalformedBodies) {
  ExpectRefused(kCompletions, R"({"model": "m", "prompt": )", "", "not valid JSON");
  ExpectRefused(kCompletions, "", "", "not valid JSON");
  ExpectRefused(kCompletions, "[1, 2]", "", "must be a JSON object");
  ExpectRefused(kCompletions, "{\"model\": \"m\", \"prompt\": \"\xff\"}", "", "not valid JSON");
  // A number beyond double (nlohmann's out_of_range, not a parse_error; found by the fuzzer).
  ExpectRefused(kCompletions, R"({"model": "m", "prompt": "x", "max_tokens": 1e549})", "",
                "a number out of range");
}

TEST(OpenAiRequestTest, WrongTypes) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt": "p"})", "model"},
      {R"({"model": 3, "prompt": "p"})", "model"},
      {R"({"model": "m"})", "prompt"},
      {R"({"model": "m", "prompt": {"a": 1}})", "prompt"},
      {R"({"model": "m", "prompt": [1, "a"]})", "prompt"},
      {R"({"model": "m", "prompt": [-1]})", "prompt"},
      {R"({"model": "m", "prompt": "p", "max_tokens": "10"})", "max_tokens"},
      {R"({"model": "m", "prompt": "p", "max_tokens": 1.5})", "max_tokens"},
      {R"({"model": "m", "prompt": "p", "max_tokens": 0})", "max_tokens"},
      {R"({"model": "m", "prompt": "p", "temperature": "hot"})", "temperature"},
      {R"({"model": "m", "prompt": "p", "seed": -1})", "seed"},
      {R"({"model": "m", "prompt": "p", "stream": "yes"})", "stream"},
      {R"({"model": "m", "prompt": "p", "stop": 5})", "stop"},
      {R"({"model": "m", "prompt": "p", "stop": ["a", 1]})", "stop"},
      {R"({"model": "m", "prompt": "p", "speculation": "draft"})", "speculation"},
      {R"({"model": "m", "prompt": "p", "speculation": {"method": "warp"}})", "speculation"},
      {R"({"model": "m", "prompt": "p", "speculation": {"num_speculative_tokens": "x"}})",
       "speculation"},
      {R"({"model": "m", "prompt": "p", "user": 7})", "user"},
      {R"({"model": "m", "prompt": "p", "response_format": {"type": 5}})", "response_format"},
  };
  for (const auto& [body, param] : cases) ExpectRefused(kCompletions, body, param, param);
}

TEST(OpenAiRequestTest, BadChatMessages) {
  ExpectRefused(kChat, R"({"model": "m"})", "messages", "non-empty array");
  ExpectRefused(kChat, R"({"model": "m", "messages": []})", "messages", "non-empty array");
  ExpectRefused(kChat, R"({"model": "m", "messages": ["hi"]})", "messages[0]", "role and content");
  ExpectRefused(kChat, R"({"model": "m", "messages": [{"content": "x"}]})", "messages[0].role",
                "must be a string");
  ExpectRefused(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "a"},
      {"role": "wizard", "content": "x"}]})",
                "messages[1].role", "unknown role \"wizard\"");
  ExpectRefused(kChat, R"({"model": "m", "messages": [{"role": "user"}]})", "messages[0].content",
                "is required");
  ExpectRefused(kChat, R"({"model": "m", "messages": [{"role": "user", "content": 5}]})",
                "messages[0].content", "string or an array");
  ExpectRefused(
      kChat,
      R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
      "messages[0].content", "only text parts");
  ExpectRefused(kChat,
                R"({"model": "m", "messages": [{"role": "user", "content": [{"type": 1}]}]})",
                "messages[0].content", "only text parts");
}

TEST(OpenAiRequestTest, UnsupportedFeaturesAreRefusedNotIgnored) {
  const std::pair<const char*, const char*> completions[] = {
      {R"({"model": "m", "prompt": "p", "n": 2})", "n"},
      {R"({"model": "m", "prompt": "p", "best_of": 3})", "best_of"},
      {R"({"model": "m", "prompt": "p", "echo": true})", "echo"},
      {R"({"model": "m", "prompt": "p", "suffix": "x"})", "suffix"},
      {R"({"model": "m", "prompt": "p", "logprobs": 2})", "logprobs"},
      {R"({"model": "m", "prompt": "p", "frequency_penalty": 0.5})", "frequency_penalty"},
      {R"({"model": "m", "prompt": "p", "logit_bias": {"5": 1}})", "logit_bias"},
      {R"({"model": "m", "prompt": "p", "stream_options": {"include_usage": true}})",
       "stream_options"},
  };
  for (const auto& [body, param] : completions) ExpectRefused(kCompletions, body, param, param);
  const std::string user = R"("messages": [{"role": "user", "content": "x"}])";
  ExpectRefused(kChat, absl::StrCat(R"({"model": "m", )", user, R"(, "top_logprobs": 2})"),
                "top_logprobs", "not supported");
  ExpectRefused(kChat, absl::StrCat(R"({"model": "m", )", user, R"(, "tools": []})"), "tools",
                "not supported");
  ExpectRefused(
      kChat,
      absl::StrCat(R"({"model": "m", )", user, R"(, "response_format": {"type": "json_object"}})"),
      "response_format", "only");
}

}  // namespace
}  // namespace tandem::coordinator
