// The tokenizer with the bundled model (models/target/tokenizer.model): the expected
// ids of tests/data/tokenizer_cases.json, and round trips of held-out code and of
// multilingual text through Decode and the incremental detokenizer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "model/tokenizer_test_util.h"

namespace tandem {
namespace {

using testing::Decoded;
using testing::kMultilingual;
using testing::ReadFile;
using testing::Stream;

constexpr char kBundledTokenizer[] = "models/target/tokenizer.model";
constexpr char kTokenizerCases[] = "tests/data/tokenizer_cases.json";
constexpr char kHeldoutCode[] = "tests/data/heldout_code.txt";

TEST(BundledTokenizerTest, MatchesExpectedIds) {
  auto tokenizer = Tokenizer::Load(kBundledTokenizer);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const nlohmann::json cases = nlohmann::json::parse(ReadFile(kTokenizerCases));
  EXPECT_EQ(tokenizer->vocab_size(), cases["vocab_size"].get<int>());
  EXPECT_EQ(tokenizer->bos_id(), cases["bos_id"].get<int>());
  EXPECT_EQ(tokenizer->eos_id(), cases["eos_id"].get<int>());
  // Loading through the model directory finds the same file.
  auto from_dir = Tokenizer::Load("models/target");
  ASSERT_TRUE(from_dir.ok()) << from_dir.status();
  EXPECT_EQ(from_dir->vocab_size(), tokenizer->vocab_size());
  ASSERT_FALSE(cases["cases"].empty());
  std::mt19937 random(17);
  for (const auto& c : cases["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<int> expected = c["ids"].get<std::vector<int>>();
    auto ids = tokenizer->Encode(text, false);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, expected) << text;
    if (c.contains("pieces")) {
      const auto pieces = c["pieces"].get<std::vector<std::string>>();
      ASSERT_EQ(pieces.size(), expected.size());
      for (size_t i = 0; i < pieces.size(); ++i) {
        EXPECT_EQ(tokenizer->IdToPiece(expected[i]), pieces[i]);
      }
    }
    EXPECT_EQ(Decoded(*tokenizer, expected), text);
    EXPECT_EQ(Stream(*tokenizer, expected, 1, &random), text);
  }
}

TEST(BundledTokenizerTest, HeldoutCodeRoundTripsAndStreams) {
  auto tokenizer = Tokenizer::Load(kBundledTokenizer);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string heldout = ReadFile(kHeldoutCode);
  ASSERT_GT(heldout.size(), 1000u);
  auto ids = tokenizer->Encode(heldout, true);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(Decoded(*tokenizer, *ids), heldout);
  std::mt19937 random(23);
  EXPECT_EQ(Stream(*tokenizer, *ids, 1, &random), heldout);
  EXPECT_EQ(Stream(*tokenizer, *ids, 7, &random), heldout);
  // Line by line as separate prompts (each starts a fresh decode).
  std::istringstream lines(heldout);
  std::string line;
  int checked = 0;
  while (std::getline(lines, line) && checked < 400) {
    auto line_ids = tokenizer->Encode(line, false);
    ASSERT_TRUE(line_ids.ok());
    ASSERT_EQ(Decoded(*tokenizer, *line_ids), line);
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

TEST(BundledTokenizerTest, MultilingualTextUsesByteFallbackAndStreamsCleanly) {
  auto tokenizer = Tokenizer::Load(kBundledTokenizer);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto ids = tokenizer->Encode(kMultilingual, true);
  ASSERT_TRUE(ids.ok());
  int byte_tokens = 0;
  for (int id : *ids) byte_tokens += tokenizer->ByteValue(id) >= 0;
  EXPECT_GT(byte_tokens, 20);
  EXPECT_EQ(Decoded(*tokenizer, *ids), kMultilingual);
  std::mt19937 random(29);
  int empty_deltas = 0;
  EXPECT_EQ(Stream(*tokenizer, *ids, 1, &random, &empty_deltas), kMultilingual);
  EXPECT_GT(empty_deltas, 0);
}

}  // namespace
}  // namespace tandem
