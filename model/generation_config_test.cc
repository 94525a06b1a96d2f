#include "model/generation_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// A model directory named `name` with a small tokenizer.json: ids 0..3 are "a".."d";
// <|end|> = 4, <|eot|> = 5 and <|eom|> = 6 are special tokens.
std::string ModelDir(const std::string& name) {
  const std::string dir = TempDir() + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  nlohmann::json added = nlohmann::json::array();
  int id = 4;
  for (const char* token : {"<|end|>", "<|eot|>", "<|eom|>"}) {
    added.push_back({{"id", id++}, {"content", token}, {"special", true}});
  }
  const nlohmann::json spec = {
      {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}}}}},
      {"added_tokens", added}};
  std::ofstream(dir + "/tokenizer.json") << spec.dump();
  return dir;
}

void Write(const std::string& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir + "/" + name) << text;
}

absl::StatusOr<GenerationConfig> Load(const std::string& dir) {
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::Load(dir);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (!tokenizer.ok()) return tokenizer.status();
  return LoadGenerationConfig(dir, *tokenizer);
}

TEST(GenerationConfigTest, StopIdsAreTheUnionOfEveryFile) {
  const std::string dir = ModelDir("union");
  Write(dir, "generation_config.json",
        R"({"eos_token_id": [6, 5], "temperature": 0.6, "top_p": 0.9, "top_k": 40,
            "do_sample": true})");
  Write(dir, "config.json", R"({"eos_token_id": 3})");  // Not read: generation has a list.
  Write(dir, "tokenizer_config.json", R"({"eos_token": {"content": "<|end|>"}})");
  absl::StatusOr<GenerationConfig> config = Load(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->stop_token_ids, ElementsAre(4, 5, 6));
  EXPECT_FLOAT_EQ(*config->sampling.temperature, 0.6f);
  EXPECT_FLOAT_EQ(*config->sampling.top_p, 0.9f);
  EXPECT_EQ(*config->sampling.top_k, 40);
  EXPECT_TRUE(*config->sampling.do_sample);
}

TEST(GenerationConfigTest, ConfigJsonStandsInForAMissingGenerationConfig) {
  const std::string dir = ModelDir("fallback");
  Write(dir, "config.json", R"({"eos_token_id": 5})");
  Write(dir, "tokenizer_config.json", R"({"eos_token": "<|eot|>"})");
  absl::StatusOr<GenerationConfig> config = Load(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->stop_token_ids, ElementsAre(5));  // Duplicates removed.
  EXPECT_FALSE(config->sampling.temperature.has_value());
  EXPECT_FALSE(config->sampling.top_p.has_value());
  EXPECT_FALSE(config->sampling.do_sample.has_value());
}

TEST(GenerationConfigTest, NoFilesNoStopIds) {
  absl::StatusOr<GenerationConfig> config = Load(ModelDir("bare"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->stop_token_ids.empty());
}

TEST(GenerationConfigTest, BundledModelStopsAtItsEos) {
  absl::StatusOr<GenerationConfig> config = Load("models/target");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->stop_token_ids, ElementsAre(2));
}

TEST(GenerationConfigTest, BadFilesAreErrorsNamingFileAndField) {
  auto error = [](const std::string& name, const std::string& file, const std::string& text) {
    const std::string dir = ModelDir(name);
    Write(dir, file, text);
    return Load(dir).status();
  };
  absl::Status s = error("bad_json", "generation_config.json", "{oops");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bad_json/generation_config.json: not a JSON object"));
  s = error("big_id", "generation_config.json", R"({"eos_token_id": [4, 7]})");
  EXPECT_THAT(s.message(), HasSubstr("generation_config.json: field \"eos_token_id\" is 7"));
  s = error("empty_list", "config.json", R"({"eos_token_id": []})");
  EXPECT_THAT(s.message(), HasSubstr("config.json: field \"eos_token_id\" is an empty list"));
  s = error("unknown_token", "tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_THAT(s.message(), HasSubstr("field \"eos_token\" (\"</s>\") is not a token"));
  s = error("token_type", "tokenizer_config.json", R"({"eos_token": 3})");
  EXPECT_THAT(s.message(), HasSubstr("must be a token string"));
  s = error("top_p", "generation_config.json", R"({"top_p": 0})");
  EXPECT_THAT(s.message(), HasSubstr("field \"top_p\" must be a number in (0, 1], got 0"));
  s = error("temperature", "generation_config.json", R"({"temperature": "hot"})");
  EXPECT_THAT(s.message(), HasSubstr("field \"temperature\" must be a number"));
  s = error("top_k", "generation_config.json", R"({"top_k": -1})");
  EXPECT_THAT(s.message(), HasSubstr("field \"top_k\" is -1"));
}

TEST(GenerationConfigTest, ModelDirectoryOf) {
  EXPECT_EQ(ModelDirectoryOf(TempDir()), TempDir());
  EXPECT_EQ(ModelDirectoryOf("models/target/tokenizer.model"), "models/target");
  EXPECT_EQ(ModelDirectoryOf("tokenizer.model"), ".");
  EXPECT_EQ(ModelDirectoryOf("/tokenizer.json"), "/");
}

}  // namespace
}  // namespace tandem
