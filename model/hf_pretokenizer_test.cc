#include "model/hf_pretokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tandem {
namespace internal {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Llama-3's Split pattern.
constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

HfPreTokenizer Parse(const json& spec) {
  absl::StatusOr<HfPreTokenizer> pre_tokenizer = HfPreTokenizer::Parse(spec, "test.json");
  EXPECT_TRUE(pre_tokenizer.ok()) << pre_tokenizer.status();
  return pre_tokenizer.ok() ? *std::move(pre_tokenizer) : HfPreTokenizer();
}

json Split(const std::string& pattern, const std::string& behavior = "Isolated") {
  return {{"type", "Split"},
          {"pattern", {{"Regex", pattern}}},
          {"behavior", behavior},
          {"invert", false}};
}

TEST(HfPreTokenizerTest, Llama3SplitUsesUnicodeCategories) {
  const HfPreTokenizer split = Parse(Split(kLlama3Pattern));
  // Letters with an optional leading non-letter, digits in threes, contractions
  // case-insensitively, punctuation with its space, whitespace before a word left apart.
  EXPECT_THAT(
      split.Split("Hello world's 12345 ÉTÉ'S  x!!\n\n", true),
      ElementsAre("Hello", " world", "'s", " ", "123", "45", " ÉTÉ", "'S", " ", " x", "!!\n\n"));
  EXPECT_THAT(split.Split("日本語 text", true), ElementsAre("日本語", " text"));
  // \s is Unicode White_Space, as in Hugging Face's patterns (U+3000 included).
  EXPECT_THAT(split.Split("a\u3000b", true), ElementsAre("a", "\u3000b"));
}

TEST(HfPreTokenizerTest, RemovedBehaviorDropsMatches) {
  const HfPreTokenizer split = Parse(Split(" ", "Removed"));
  EXPECT_THAT(split.Split("a b  c", true), ElementsAre("a", "b", "c"));
}

TEST(HfPreTokenizerTest, ByteLevelMapsEveryByte) {
  const HfPreTokenizer byte_level =
      Parse({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  // Space -> U+0120 "Ġ", newline -> U+010A "Ċ", "é" (C3 A9) -> "Ã©".
  EXPECT_THAT(byte_level.Split("a b\né", true), ElementsAre("aĠbĊÃ©"));
}

TEST(HfPreTokenizerTest, ByteLevelWithGpt2RegexAndPrefixSpace) {
  const HfPreTokenizer gpt2 = Parse({{"type", "ByteLevel"}, {"add_prefix_space", true}});
  EXPECT_THAT(gpt2.Split("Hi there's 42", true), ElementsAre("ĠHi", "Ġthere", "'s", "Ġ42"));
}

TEST(HfPreTokenizerTest, SequenceAppliesStepsInOrder) {
  const HfPreTokenizer sequence =
      Parse({{"type", "Sequence"},
             {"pretokenizers",
              {Split(kLlama3Pattern),
               {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}});
  EXPECT_THAT(sequence.Split("I'm  fine", true), ElementsAre("I", "'m", "Ġ", "Ġfine"));
}

TEST(HfPreTokenizerTest, MetaspaceReplacesSpacesAndPrependsPerScheme) {
  const json first = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}};
  EXPECT_THAT(Parse(first).Split("Hi  you", true), ElementsAre("▁Hi", "▁", "▁you"));
  EXPECT_THAT(Parse(first).Split("Hi", false), ElementsAre("Hi"));
  const json never = {{"type", "Metaspace"}, {"prepend_scheme", "never"}, {"split", false}};
  EXPECT_THAT(Parse(never).Split("a b", true), ElementsAre("a▁b"));
}

TEST(HfPreTokenizerTest, ByteLevelAlphabetIsABijection) {
  for (int byte = 0; byte < 256; ++byte) {
    const std::string& character = ByteLevelCharacter(static_cast<unsigned char>(byte));
    ASSERT_FALSE(character.empty());
    const auto* b = reinterpret_cast<const unsigned char*>(character.data());
    const char32_t code_point = character.size() == 1 ? b[0] : ((b[0] & 0x1F) << 6) | (b[1] & 0x3F);
    EXPECT_EQ(ByteLevelByte(code_point), byte);
  }
  EXPECT_EQ(ByteLevelCharacter(' '), "Ġ");
  EXPECT_EQ(ByteLevelCharacter('A'), "A");
  EXPECT_EQ(ByteLevelByte(U'Ġ'), ' ');
  EXPECT_EQ(ByteLevelByte(0x4E00), -1);
}

TEST(HfPreTokenizerTest, UnsupportedOrBrokenSpecsAreRejected) {
  auto error = [](const json& spec) {
    return HfPreTokenizer::Parse(spec, "tok.json").status().ToString();
  };
  EXPECT_THAT(error({{"type", "Whitespace"}}), HasSubstr("\"Whitespace\" is not supported"));
  EXPECT_THAT(error(Split("(unclosed")), HasSubstr("does not compile"));
  EXPECT_THAT(error(Split("x", "MergedWithNext")), HasSubstr("behavior \"MergedWithNext\""));
  EXPECT_THAT(error({{"type", "Split"}, {"behavior", "Isolated"}}), HasSubstr("no pattern"));
  EXPECT_THAT(error({{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}}),
              HasSubstr("prepend_scheme"));
  EXPECT_THAT(error({{"type", "Whitespace"}}), HasSubstr("tok.json"));
}

TEST(HfNormalizerTest, NfcComposesAndSequenceAppliesInOrder) {
  absl::StatusOr<HfNormalizer> nfc = HfNormalizer::Parse({{"type", "NFC"}}, "t");
  ASSERT_TRUE(nfc.ok()) << nfc.status();
  EXPECT_EQ(nfc->Apply("e\u0301 A\u030a \u212b"), "\u00e9 \u00c5 \u00c5");
  absl::StatusOr<HfNormalizer> llama2 = HfNormalizer::Parse(
      {{"type", "Sequence"},
       {"normalizers",
        {{{"type", "Prepend"}, {"prepend", "▁"}},
         {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}},
      "t");
  ASSERT_TRUE(llama2.ok()) << llama2.status();
  EXPECT_EQ(llama2->Apply("Hi  you"), "▁Hi▁▁you");
  EXPECT_EQ(llama2->Apply(""), "");  // Prepend leaves empty text empty.
  absl::StatusOr<HfNormalizer> none = HfNormalizer::Parse(json(), "t");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->Apply("e\u0301"), "e\u0301");
}

TEST(HfNormalizerTest, UnsupportedNormalizersAreRejected) {
  EXPECT_THAT(HfNormalizer::Parse({{"type", "Lowercase"}}, "t.json").status().ToString(),
              HasSubstr("t.json: normalizer \"Lowercase\" is not supported"));
  EXPECT_THAT(HfNormalizer::Parse({{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}}, "t")
                  .status()
                  .ToString(),
              HasSubstr("only a non-empty String pattern"));
}

}  // namespace
}  // namespace internal
}  // namespace tandem
