#include "model/hf_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace tandem {
namespace internal {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

json AddedToken(int id, const std::string& content, bool special, bool lstrip = false,
                bool rstrip = false) {
  return {{"id", id},         {"content", content},  {"special", special},  {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", false}, {"single_word", false}};
}

// A byte-level BPE in the Llama-3 layout (Split on spaces-before-words + ByteLevel).
json ByteLevelSpec(const json& merges) {
  return {
      {"model",
       {{"type", "BPE"},
        {"vocab",
         {{"a", 0},
          {"b", 1},
          {"c", 2},
          {"Ġ", 3},
          {"ab", 4},
          {"bc", 5},
          {"abc", 6},
          {"Ġa", 7},
          {"Ã", 8},
          {"©", 9}}},
        {"merges", merges}}},
      {"added_tokens", {AddedToken(10, "<|eot|>", true), AddedToken(11, "<x>", false, true, true)}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", R"( ?\p{L}+|\s+)"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
  };
}

std::unique_ptr<HfTokenizer> Parse(const json& spec, const json& config = json()) {
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tokenizer =
      HfTokenizer::Parse(spec.dump(), config.is_null() ? "" : config.dump(), "test.json");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

TEST(HfTokenizerTest, MergesApplyInRankOrder) {
  // "b c" ranks first: a + bc, then "a bc" -> abc.
  auto bc_first = Parse(ByteLevelSpec({"b c", "a b", "a bc"}));
  ASSERT_NE(bc_first, nullptr);
  EXPECT_THAT(bc_first->Encode("abc"), ElementsAre(6));
  EXPECT_THAT(bc_first->Encode("ab"), ElementsAre(4));
  // Without "a bc", ranking "b c" first leaves a + bc, although "a b" + "ab c" exist.
  auto no_abc = Parse(ByteLevelSpec({"b c", "a b"}));
  ASSERT_NE(no_abc, nullptr);
  EXPECT_THAT(no_abc->Encode("abc"), ElementsAre(0, 5));
  auto ab_first = Parse(ByteLevelSpec({"a b", "b c"}));
  ASSERT_NE(ab_first, nullptr);
  EXPECT_THAT(ab_first->Encode("abc"), ElementsAre(4, 2));
  // The same pair twice: the leftmost merges first ("a a" is not a merge here, so use
  // "ab" twice with a space between: words are merged separately).
  EXPECT_THAT(ab_first->Encode("ab ab"), ElementsAre(4, 3, 4));
}

TEST(HfTokenizerTest, ArrayMergesAndIgnoreMerges) {
  json spec = ByteLevelSpec(json::array({json::array({"a", "b"})}));
  EXPECT_THAT(Parse(spec)->Encode("abc"), ElementsAre(4, 2));
  // With ignore_merges a word in the vocabulary is one token, merges or not.
  spec["model"]["ignore_merges"] = true;
  EXPECT_THAT(Parse(spec)->Encode("abc"), ElementsAre(6));
  EXPECT_THAT(Parse(spec)->Encode("bc"), ElementsAre(5));
}

TEST(HfTokenizerTest, AddedTokensAreMatchedFirstWithTheirStripRules) {
  auto tokenizer = Parse(ByteLevelSpec({"a b", "Ġ a"}));
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_THAT(tokenizer->Encode("ab<|eot|> a"), ElementsAre(4, 10, 7));
  // "<x>" swallows the whitespace on both sides.
  EXPECT_THAT(tokenizer->Encode("a  <x>  a"), ElementsAre(0, 11, 0));
  EXPECT_THAT(tokenizer->Encode("<|eot|<|eot|>"), ElementsAre(10));  // Unknown chars dropped.
  EXPECT_TRUE(tokenizer->IsControl(10));
  EXPECT_FALSE(tokenizer->IsControl(11));
  EXPECT_EQ(tokenizer->PieceToId("<|eot|>"), 10);
  EXPECT_EQ(tokenizer->PieceToId("ab"), 4);
  EXPECT_EQ(tokenizer->PieceToId("zz"), -1);
  EXPECT_EQ(tokenizer->vocab_size(), 12);
}

TEST(HfTokenizerTest, DecodeSkipsSpecialTokensAndJoinsBytes) {
  auto tokenizer = Parse(ByteLevelSpec({"a b"}));
  ASSERT_NE(tokenizer, nullptr);
  const std::vector<int> ids = {4, 10, 7, 8, 9, 11};
  EXPECT_EQ(tokenizer->Decode(ids, true), "ab aé<x>");
  EXPECT_EQ(tokenizer->RawBytes(8), "\xC3");
  EXPECT_EQ(tokenizer->RawBytes(10), "");
}

TEST(HfTokenizerTest, BosAndEosFromTheConfigAndThePostProcessor) {
  json spec = ByteLevelSpec({"a b"});
  auto plain = Parse(spec);
  EXPECT_EQ(plain->bos_id(), -1);
  EXPECT_EQ(plain->eos_id(), -1);
  auto configured = Parse(spec, {{"bos_token", {{"content", "<x>"}}}, {"eos_token", "<|eot|>"}});
  EXPECT_EQ(configured->bos_id(), 11);
  EXPECT_EQ(configured->eos_id(), 10);
  spec["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<|eot|>"}}}}, {{"Sequence", {{"id", "A"}}}}}}};
  EXPECT_EQ(Parse(spec, {{"bos_token", "<x>"}})->bos_id(), 10);
}

// The SentencePiece-style BPE Hugging Face exports for Llama-2 / Mistral.
json SentencePieceStyleSpec() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"▁", 2}, {"h", 3}, {"i", 4}, {"▁h", 5}, {"▁hi", 6}};
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    vocab[name] = 7 + byte;
  }
  return {
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", {"▁ h", "▁h i"}},
        {"unk_token", "<unk>"},
        {"byte_fallback", true},
        {"fuse_unk", true}}},
      {"added_tokens", {AddedToken(0, "<unk>", true), AddedToken(1, "<s>", true)}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "▁"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
      {"pre_tokenizer", nullptr},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
  };
}

TEST(HfTokenizerTest, SentencePieceStyleWithByteFallback) {
  auto tokenizer = Parse(SentencePieceStyleSpec());
  ASSERT_NE(tokenizer, nullptr);
  // "▁hi" merges; "中" (E4 B8 AD) is not in the vocabulary: byte tokens.
  EXPECT_THAT(tokenizer->Encode("hi 中"), ElementsAre(6, 2, 7 + 0xE4, 7 + 0xB8, 7 + 0xAD));
  EXPECT_EQ(tokenizer->Decode(tokenizer->Encode("hi 中"), true), "hi 中");
  EXPECT_EQ(tokenizer->ByteValue(7 + 0x41), 0x41);
  EXPECT_EQ(tokenizer->ByteValue(6), -1);
  // The normalizer runs per stretch between added tokens.
  EXPECT_THAT(tokenizer->Encode("<s>hi"), ElementsAre(1, 6));
}

TEST(HfTokenizerTest, UnknownCharactersWithoutByteFallbackFuse) {
  json spec = SentencePieceStyleSpec();
  spec["model"]["byte_fallback"] = false;
  auto tokenizer = Parse(spec);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_THAT(tokenizer->Encode("h中中"), ElementsAre(5, 0));  // "▁h", one fused <unk>.
  spec["model"]["fuse_unk"] = false;
  EXPECT_THAT(Parse(spec)->Encode("h中中"), ElementsAre(5, 0, 0));
}

TEST(HfTokenizerTest, BadFilesAreRejectedWithTheReason) {
  auto error = [](const json& spec) {
    return HfTokenizer::Parse(spec.dump(), "", "m/tokenizer.json").status().ToString();
  };
  EXPECT_THAT(HfTokenizer::Parse("{not json", "", "m/tokenizer.json").status().ToString(),
              HasSubstr("m/tokenizer.json: tokenizer.json is not a JSON object"));
  EXPECT_THAT(HfTokenizer::Parse(ByteLevelSpec({"a b"}).dump(), "[1", "m").status().ToString(),
              HasSubstr("tokenizer_config.json is not a JSON object"));
  json spec = ByteLevelSpec({"a b"});
  spec["model"]["type"] = "WordPiece";
  EXPECT_THAT(error(spec), HasSubstr("model type \"WordPiece\" is not supported"));
  EXPECT_THAT(error(ByteLevelSpec({"a z"})), HasSubstr("model.merges[0]"));
  EXPECT_THAT(error(ByteLevelSpec({"ab"})), HasSubstr("is not \"left right\""));
  spec = ByteLevelSpec({"a b"});
  spec["model"]["vocab"]["x"] = -3;
  EXPECT_THAT(error(spec), HasSubstr("model.vocab[\"x\"] is not an id"));
  spec = ByteLevelSpec({"a b"});
  spec["model"]["unk_token"] = "<nope>";
  EXPECT_THAT(error(spec), HasSubstr("unk_token \"<nope>\" is not in the vocabulary"));
  spec = ByteLevelSpec({"a b"});
  spec["added_tokens"][0]["single_word"] = true;
  EXPECT_THAT(error(spec), HasSubstr("single_word"));
  spec = ByteLevelSpec({"a b"});
  spec.erase("model");
  EXPECT_THAT(error(spec), HasSubstr("no \"model\""));
}

}  // namespace
}  // namespace internal
}  // namespace tandem
