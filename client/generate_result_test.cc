// tandem generate's gathering of streamed messages and its --json output.
#include "client/generate_result.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tandem::client {
namespace {

TEST(GenerateResultTest, GathersMessagesIntoJson) {
  GenerateResult r;
  v1::GenerateStreamResponse m;
  m.set_request_id("req-1");
  m.set_text_delta("def");
  m.add_token_ids(7);
  m.add_logprobs(-0.5f);
  AddStreamMessage(m, &r);
  EXPECT_FALSE(r.has_stats);
  m.set_text_delta(" f");
  m.set_token_ids(0, 9);
  m.set_logprobs(0, -1.25f);
  m.set_finish_reason(v1::FINISH_REASON_EOS);
  m.mutable_stats()->set_generated_tokens(2);
  m.mutable_stats()->set_acceptance_rate(0.75f);
  m.mutable_stats()->set_method(v1::SPECULATION_METHOD_DRAFT);
  AddStreamMessage(m, &r);
  EXPECT_TRUE(r.has_stats);
  r.client_seconds = 0.5;
  nlohmann::json j = nlohmann::json::parse(GenerateResultJson(r));
  EXPECT_EQ(j["request_id"], "req-1");
  EXPECT_EQ(j["text"], "def f");
  EXPECT_EQ(j["token_ids"], nlohmann::json({7, 9}));
  EXPECT_EQ(j["logprobs"], nlohmann::json({-0.5, -1.25}));
  EXPECT_EQ(j["finish_reason"], "eos");
  EXPECT_EQ(j["stats"]["generated_tokens"], 2);
  EXPECT_EQ(j["stats"]["acceptance_rate"], 0.75);
  EXPECT_EQ(j["stats"]["method"], "SPECULATION_METHOD_DRAFT");
  EXPECT_EQ(j["stats"]["draft_tokens_proposed"], 0);  // Zero fields are printed too.
  EXPECT_EQ(j["client_seconds"], 0.5);
}

TEST(GenerateResultTest, UnfinishedHasNullFinishReason) {
  nlohmann::json j = nlohmann::json::parse(GenerateResultJson(GenerateResult{}));
  EXPECT_TRUE(j["finish_reason"].is_null());
  EXPECT_TRUE(j["token_ids"].empty());
}

}  // namespace
}  // namespace tandem::client
