// OpenAI-compatible response bodies: parsed back as JSON, every field the OpenAI clients
// read is where they read it.
#include "coordinator/openai_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tandem::coordinator {
namespace {

using json = nlohmann::json;

class OpenAiResponseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tokenizer::Load("models/target");
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::make_unique<Tokenizer>(*std::move(t));
    stats_.set_generated_tokens(3);
    stats_.set_draft_tokens_proposed(4);
    stats_.set_draft_tokens_accepted(2);
    stats_.set_acceptance_rate(0.5f);
    stats_.set_method(v1::SPECULATION_METHOD_DRAFT);
  }

  OpenAiResponseHeader Header(OpenAiEndpoint endpoint, bool logprobs) const {
    return {endpoint, "id-1", "target", 1700000000, logprobs, tokenizer_.get()};
  }

  // "hello world" as token ids, with made-up log-probabilities.
  OpenAiOutput Output() const {
    OpenAiOutput out;
    out.text = "hello world";
    std::vector<int> ids = *tokenizer_->Encode("hello world", false);
    out.token_ids.assign(ids.begin(), ids.end());
    out.logprobs.assign(ids.size(), -0.25f);
    out.finish_reason = v1::FINISH_REASON_LENGTH;
    return out;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  v1::RequestStats stats_;
};

void ExpectUsage(const json& usage) {
  EXPECT_EQ(usage["prompt_tokens"], 5);
  EXPECT_EQ(usage["completion_tokens"], 3);
  EXPECT_EQ(usage["total_tokens"], 8);
  EXPECT_EQ(usage["tandem"]["draft_tokens_accepted"], 2);
  EXPECT_EQ(usage["tandem"]["acceptance_rate"], 0.5);
  EXPECT_EQ(usage["tandem"]["method"], "SPECULATION_METHOD_DRAFT");
}

TEST_F(OpenAiResponseTest, Completion) {
  json body =
      json::parse(CompletionBody(Header(OpenAiEndpoint::kCompletions, true), Output(), 5, stats_));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["id"], "id-1");
  EXPECT_EQ(body["model"], "target");
  EXPECT_EQ(body["created"], 1700000000);
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["text"], "hello world");
  EXPECT_EQ(choice["finish_reason"], "length");
  const json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), Output().token_ids.size());
  std::string joined;
  for (const json& t : lp["tokens"]) joined += t.get<std::string>();
  EXPECT_EQ(joined, "hello world");  // Token texts concatenate to the text.
  EXPECT_EQ(lp["token_logprobs"][0], -0.25);
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_TRUE(lp["top_logprobs"].is_null());
  ExpectUsage(body["usage"]);
}

TEST_F(OpenAiResponseTest, ChatCompletion) {
  OpenAiOutput out = Output();
  out.finish_reason = v1::FINISH_REASON_EOS;
  json body =
      json::parse(CompletionBody(Header(OpenAiEndpoint::kChatCompletions, true), out, 5, stats_));
  EXPECT_EQ(body["object"], "chat.completion");
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["message"]["content"], "hello world");
  EXPECT_EQ(choice["finish_reason"], "stop");
  const json& first = choice["logprobs"]["content"][0];
  EXPECT_EQ(first["logprob"], -0.25);
  ASSERT_FALSE(first["bytes"].empty());
  EXPECT_EQ(first["bytes"][0], static_cast<int>(first["token"].get<std::string>()[0]));
  EXPECT_TRUE(first["top_logprobs"].empty());
  // Without logprobs the field is null.
  body =
      json::parse(CompletionBody(Header(OpenAiEndpoint::kChatCompletions, false), out, 5, stats_));
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
}

// Strips "data: " and the blank line of one event.
json EventData(const std::string& event) {
  EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n") << event;
  return json::parse(event.substr(6, event.size() - 8));
}

TEST_F(OpenAiResponseTest, StreamEvents) {
  OpenAiOutput delta;
  delta.text = "ab";
  json chunk = EventData(
      StreamChunkEvent(Header(OpenAiEndpoint::kChatCompletions, false), delta, true, true));
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_EQ(chunk["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "ab");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunk.contains("usage") && chunk["usage"].is_null());
  chunk = EventData(
      StreamChunkEvent(Header(OpenAiEndpoint::kChatCompletions, false), delta, false, false));
  EXPECT_FALSE(chunk["choices"][0]["delta"].contains("role"));
  EXPECT_FALSE(chunk.contains("usage"));
  delta.finish_reason = v1::FINISH_REASON_STOP;
  chunk =
      EventData(StreamChunkEvent(Header(OpenAiEndpoint::kCompletions, false), delta, true, false));
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["choices"][0]["text"], "ab");
  EXPECT_EQ(chunk["choices"][0]["finish_reason"], "stop");
  json usage = EventData(StreamUsageEvent(Header(OpenAiEndpoint::kCompletions, false), 5, stats_));
  EXPECT_TRUE(usage["choices"].empty());
  ExpectUsage(usage["usage"]);
  EXPECT_EQ(StreamDoneEvent(), "data: [DONE]\n\n");
}

TEST_F(OpenAiResponseTest, ModelList) {
  json body = json::parse(ModelListBody("target", 7));
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "target");
  EXPECT_EQ(body["data"][0]["object"], "model");
}

TEST(OpenAiErrorTest, ShapeAndStatus) {
  json body = json::parse(ErrorBody(
      WithParam(absl::InvalidArgumentError("max_tokens: must be an integer"), "max_tokens")));
  EXPECT_EQ(body["error"]["message"], "max_tokens: must be an integer");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "max_tokens");
  EXPECT_TRUE(body["error"]["code"].is_null());
  body = json::parse(
      ErrorBody(WithErrorCode(absl::NotFoundError("no such model"), "model_not_found")));
  EXPECT_EQ(body["error"]["code"], "model_not_found");
  EXPECT_TRUE(body["error"]["param"].is_null());
  EXPECT_EQ(json::parse(ErrorBody(absl::UnauthenticatedError("x")))["error"]["type"],
            "authentication_error");
  EXPECT_EQ(json::parse(ErrorBody(absl::UnavailableError("x")))["error"]["type"], "server_error");
  EXPECT_EQ(HttpStatusOf(absl::InvalidArgumentError("")), 400);
  EXPECT_EQ(HttpStatusOf(absl::FailedPreconditionError("")), 400);
  EXPECT_EQ(HttpStatusOf(absl::UnauthenticatedError("")), 401);
  EXPECT_EQ(HttpStatusOf(absl::NotFoundError("")), 404);
  EXPECT_EQ(HttpStatusOf(absl::ResourceExhaustedError("")), 429);
  EXPECT_EQ(HttpStatusOf(absl::UnavailableError("")), 503);
  EXPECT_EQ(HttpStatusOf(absl::DeadlineExceededError("")), 504);
  EXPECT_EQ(HttpStatusOf(absl::InternalError("")), 500);
}

}  // namespace
}  // namespace tandem::coordinator
