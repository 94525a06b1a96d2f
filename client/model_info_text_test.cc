// ModelInfoText and ModelInfoJson on a full and an empty ModelInfo: every topic is
// there, the stop ids as a list, the sampling defaults (greedy marked), a missing draft.
#include "client/model_info_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tandem::client {
namespace {

using ::testing::HasSubstr;

v1::ModelInfo FullInfo() {
  v1::ModelInfo info;
  info.mutable_target()->set_name("Llama-3-8B-Instruct");
  info.mutable_target()->set_architecture("LlamaForCausalLM");
  info.mutable_target()->set_vocab_size(128256);
  info.mutable_target()->set_tensor_parallel_size(2);
  info.mutable_target()->set_backend("cuda");
  info.mutable_draft()->set_name("draft");
  info.set_draft_available(false);
  info.set_context_length(8192);
  info.set_max_new_tokens_limit(4096);
  info.set_max_speculative_tokens(8);
  info.set_max_queue(256);
  info.set_max_tree_nodes(32);
  info.set_bos_token_id(128000);
  info.set_eos_token_id(128001);
  for (int id : {128001, 128008, 128009}) info.add_stop_token_ids(id);
  info.add_methods(v1::SPECULATION_METHOD_AUTO);
  info.add_methods(v1::SPECULATION_METHOD_PROMPT_LOOKUP);
  info.mutable_default_sampling()->set_temperature(0.6f);
  info.mutable_default_sampling()->set_top_p(0.9f);
  info.mutable_default_sampling()->set_top_k(0);
  return info;
}

TEST(ModelInfoTextTest, EveryTopicOnItsLine) {
  const std::string text = ModelInfoText(FullInfo());
  EXPECT_THAT(text, HasSubstr("target     Llama-3-8B-Instruct (LlamaForCausalLM, vocab 128256, "
                              "tp 2, cuda)\n"));
  EXPECT_THAT(text, HasSubstr(", unavailable\n"));
  EXPECT_THAT(text, HasSubstr("limits     context 8192 tokens, max_new_tokens 4096, K 8, "
                              "tree nodes 32, queue 256\n"));
  EXPECT_THAT(text, HasSubstr("methods    auto, prompt_lookup\n"));
  EXPECT_THAT(text, HasSubstr("tokens     bos 128000, eos 128001, stop ids [128001, 128008, "
                              "128009]\n"));
  EXPECT_THAT(text, HasSubstr("sampling   unset fields: temperature 0.6, top_p 0.9, top_k 0\n"));
}

TEST(ModelInfoTextTest, EmptyInfoIsGreedyWithNoDraftAndNoStopIds) {
  const std::string text = ModelInfoText(v1::ModelInfo());
  EXPECT_THAT(text, HasSubstr("draft      none\n"));
  EXPECT_THAT(text, HasSubstr("stop ids []\n"));
  EXPECT_THAT(text, HasSubstr("temperature 0 (greedy), top_p 1, top_k 0\n"));
}

TEST(ModelInfoJsonTest, ProtoFieldNamesAndListedStopIds) {
  nlohmann::json json = nlohmann::json::parse(ModelInfoJson(FullInfo()));
  EXPECT_EQ(json["stop_token_ids"], nlohmann::json({128001, 128008, 128009}));
  EXPECT_EQ(json["eos_token_id"], 128001);
  EXPECT_FLOAT_EQ(json["default_sampling"]["temperature"].get<float>(), 0.6f);
  EXPECT_EQ(json["default_sampling"]["top_k"], 0);  // Set explicitly: printed.
  nlohmann::json empty = nlohmann::json::parse(ModelInfoJson(v1::ModelInfo()));
  EXPECT_TRUE(empty["stop_token_ids"].is_array() && empty["stop_token_ids"].empty());
}

}  // namespace
}  // namespace tandem::client
