#include "model/hf_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tandem {
namespace internal {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

HfDecoder Parse(const json& spec) {
  absl::StatusOr<HfDecoder> decoder = HfDecoder::Parse(spec, "test.json");
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  return decoder.ok() ? *std::move(decoder) : HfDecoder();
}

// The decoder Hugging Face exports for Llama-2 and Mistral.
json SentencePieceStyle() {
  return {{"type", "Sequence"},
          {"decoders",
           {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
            {{"type", "ByteFallback"}},
            {{"type", "Fuse"}},
            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
}

std::string Decode(const HfDecoder& decoder, const std::vector<absl::string_view>& tokens,
                   bool at_text_start = true) {
  return decoder.Decode(tokens, at_text_start);
}

TEST(HfDecoderTest, ByteLevelMapsCharactersBackToBytes) {
  const HfDecoder decoder = Parse({{"type", "ByteLevel"}});
  EXPECT_EQ(Decode(decoder, {"Hello", "Ġworld", "Ċ"}), "Hello world\n");
  // "é" is C3 A9, spelled "Ã©"; split over two tokens it still decodes once whole.
  EXPECT_EQ(Decode(decoder, {"Ã", "©"}), "é");
  EXPECT_EQ(decoder.RawBytes("Ã"), "\xC3");
  // A lone lead byte decodes to one U+FFFD; a token outside the alphabet to itself.
  EXPECT_EQ(Decode(decoder, {"Ã", "a"}),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(Decode(decoder, {"<think>", "中"}), "<think>中");
  EXPECT_EQ(Decode(decoder, {"Ġx"}, /*at_text_start=*/true), " x");  // No stripping.
}

TEST(HfDecoderTest, SentencePieceStyleSequence) {
  const HfDecoder decoder = Parse(SentencePieceStyle());
  EXPECT_TRUE(decoder.byte_fallback());
  EXPECT_EQ(Decode(decoder, {"▁Hello", "▁world"}), "Hello world");
  EXPECT_EQ(Decode(decoder, {"▁Hello", "▁world"}, /*at_text_start=*/false), " Hello world");
  EXPECT_EQ(Decode(decoder, {"▁", "▁x"}), " x");  // Strip removes one space only.
  EXPECT_EQ(Decode(decoder, {"<0xE4>", "<0xB8>", "<0xAD>", "▁ok"}), "中 ok");
  // An ill-formed byte run: its well-formed characters stay (see the class comment).
  EXPECT_EQ(Decode(decoder, {"<0x41>", "<0xE4>", "x"}), "A\xEF\xBF\xBDx");
  EXPECT_EQ(Decode(decoder, {"<0xE4>", "<0xB8>", "<0x41>"}),
            "\xEF\xBF\xBD"
            "A");
  EXPECT_EQ(decoder.RawBytes("<0x0A>"), "\n");
  EXPECT_EQ(decoder.RawBytes("▁a"), " a");
}

TEST(HfDecoderTest, WithoutByteFallbackByteTokensAreText) {
  const HfDecoder decoder = Parse(json());
  EXPECT_FALSE(decoder.byte_fallback());
  EXPECT_EQ(Decode(decoder, {"<0x41>", "b"}), "<0x41>b");
}

TEST(HfDecoderTest, MetaspaceDecoder) {
  const HfDecoder decoder =
      Parse({{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}});
  EXPECT_EQ(Decode(decoder, {"▁Hi", "▁there"}), "Hi there");
  EXPECT_EQ(Decode(decoder, {"▁Hi"}, /*at_text_start=*/false), " Hi");
}

TEST(HfDecoderTest, ParseByteToken) {
  EXPECT_EQ(ParseByteToken("<0x0A>"), 10);
  EXPECT_EQ(ParseByteToken("<0xff>"), 255);
  EXPECT_EQ(ParseByteToken("<0xG0>"), -1);
  EXPECT_EQ(ParseByteToken("<0x0A"), -1);
  EXPECT_EQ(ParseByteToken("a"), -1);
}

TEST(HfDecoderTest, UnsupportedDecodersAreRejected) {
  EXPECT_THAT(HfDecoder::Parse({{"type", "WordPiece"}}, "t.json").status().ToString(),
              HasSubstr("t.json: decoder \"WordPiece\" is not supported"));
  EXPECT_FALSE(HfDecoder::Parse({{"type", "Strip"}, {"content", " "}, {"stop", 1}}, "t").ok());
  EXPECT_FALSE(HfDecoder::Parse({{"type", "Replace"}, {"pattern", {{"Regex", "x"}}}}, "t").ok());
}

}  // namespace
}  // namespace internal
}  // namespace tandem
