#include "model/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/tokenizer_test_util.h"

namespace tandem {
namespace {

using testing::Decoded;
using ::testing::HasSubstr;
using testing::kMultilingual;
using testing::Stream;

// Trained by sentencepiece_test_trainer.py (see model/BUILD).
constexpr char kTestModels[] = "model/test_tokenizers/";

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

void AbortWithStatus(const absl::Status& status) {
  std::fprintf(stderr, "cannot load a test tokenizer: %s\n", status.ToString().c_str());
  std::abort();
}

// Loads (once) a test model: "bpe_dummy_prefix", "bpe_no_dummy_prefix", ...
const Tokenizer& TestTokenizer(const std::string& name) {
  static auto* tokenizers = new std::map<std::string, Tokenizer>();
  auto it = tokenizers->find(name);
  if (it != tokenizers->end()) return it->second;
  auto tokenizer = Tokenizer::Load(kTestModels + name + ".model");
  // Without a model there is nothing to test: stop here with the reason.
  if (!tokenizer.ok()) AbortWithStatus(tokenizer.status());
  return tokenizers->emplace(name, *std::move(tokenizer)).first->second;
}

// Ids of the byte-fallback pieces spelling `bytes`.
std::vector<int> ByteIds(const Tokenizer& tokenizer, const std::string& bytes) {
  std::vector<int> ids;
  for (unsigned char byte : bytes) {
    for (int id = 0; id < tokenizer.vocab_size(); ++id) {
      if (tokenizer.ByteValue(id) == byte) {
        ids.push_back(id);
        break;
      }
    }
  }
  EXPECT_EQ(ids.size(), bytes.size()) << "byte pieces missing";
  return ids;
}

// The tokenizer reads SentencePiece models natively: libsentencepiece (which bundles
// its own protobuf and breaks processes that also use libprotobuf) stays out.
TEST(TokenizerLinkTest, SentencePieceLibraryIsNotLoaded) {
  std::vector<std::string> libraries;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
        return 0;
      },
      &libraries);
  EXPECT_GT(libraries.size(), 1u);
  for (const std::string& library : libraries) {
    const std::string name = library.substr(library.rfind('/') + 1);
    EXPECT_NE(name.rfind("libsentencepiece.so", 0), 0u) << library;
    EXPECT_NE(name.rfind("libsentencepiece_train.so", 0), 0u) << library;
  }
}

TEST(TokenizerTest, LoadErrors) {
  auto missing = Tokenizer::Load(TempDir() + "/no_such_dir");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("no_such_dir"));
  // A directory without tokenizer.model.
  missing = Tokenizer::Load(TempDir());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/tokenizer.model"));
  const std::string garbage = TempDir() + "/garbage.model";
  std::ofstream(garbage) << "this is not a protobuf";
  auto invalid = Tokenizer::Load(garbage);
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(invalid.status().message(), HasSubstr(garbage));
}

TEST(TokenizerTest, UnsupportedModelsAreRejectedWithTheReason) {
  const std::string unigram = std::string(kTestModels) + "unigram.model";
  auto status = Tokenizer::Load(unigram).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(unigram));
  EXPECT_THAT(status.message(), HasSubstr("model type UNIGRAM"));
  const std::string nfkc = std::string(kTestModels) + "nfkc.model";
  status = Tokenizer::Load(nfkc).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(nfkc));
  EXPECT_THAT(status.message(), HasSubstr("normalizer 'nmt_nfkc'"));
}

// No byte fallback, extra whitespace removed, user-defined symbols.
TEST(TokenizerTest, ModelWithoutByteFallback) {
  const Tokenizer& t = TestTokenizer("bpe_extra_whitespaces");
  for (int id = 0; id < t.vocab_size(); ++id) EXPECT_EQ(t.ByteValue(id), -1);
  // Characters outside the vocabulary: one <unk> for each run of them.
  auto ids = t.Encode("\xE4\xB8\x96\xE7\x95\x8C", false);  // 世界
  ASSERT_TRUE(ids.ok());
  ASSERT_FALSE(ids->empty());
  EXPECT_EQ(t.IdToPiece(ids->back()), "<unk>");
  EXPECT_EQ(Decoded(t, *ids), " \xE2\x81\x87 ");
  // User-defined symbols come out whole; spaces are collapsed and trimmed.
  ids = t.Encode("  <tool>   x  ", false);
  ASSERT_TRUE(ids.ok());
  std::vector<std::string> pieces;
  for (int id : *ids) pieces.push_back(t.IdToPiece(id));
  EXPECT_THAT(pieces, ::testing::Contains("<tool>"));
  EXPECT_EQ(Decoded(t, *ids), "<tool> x");
}

// Byte-fallback models: Llama-2 style, the bundled models' style, unused pieces.
class TrainedTokenizerTest : public ::testing::TestWithParam<std::string> {
 protected:
  const Tokenizer& tokenizer() { return TestTokenizer(GetParam()); }
};

TEST_P(TrainedTokenizerTest, SpecialIdsAndErrors) {
  const Tokenizer& t = tokenizer();
  EXPECT_GE(t.vocab_size(), 259);  // 256 byte pieces + <unk>, <s>, </s>.
  EXPECT_EQ(t.IdToPiece(t.bos_id()), "<s>");
  EXPECT_EQ(t.IdToPiece(t.eos_id()), "</s>");
  EXPECT_TRUE(t.IsControl(t.bos_id()));
  EXPECT_TRUE(t.IsValidId(t.vocab_size() - 1));
  EXPECT_FALSE(t.IsValidId(t.vocab_size()));
  EXPECT_FALSE(t.IsValidId(-1));
  EXPECT_EQ(t.ByteValue(ByteIds(t, "\n")[0]), 0x0A);
  EXPECT_EQ(t.ByteValue(t.bos_id()), -1);

  auto bad_text = t.Encode("abc\xFF", false);
  EXPECT_EQ(bad_text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_text.status().message(), HasSubstr("not valid UTF-8"));
  auto bad_ids = t.Decode(std::vector<int>{5, t.vocab_size()});
  EXPECT_EQ(bad_ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_ids.status().message(), HasSubstr("at index 1"));
  EXPECT_FALSE(t.Decode(std::vector<int>{-1}).ok());

  auto with_bos = t.Encode("the model", true);
  auto without_bos = t.Encode("the model", false);
  ASSERT_TRUE(with_bos.ok() && without_bos.ok());
  ASSERT_EQ(with_bos->size(), without_bos->size() + 1);
  EXPECT_EQ((*with_bos)[0], t.bos_id());
  EXPECT_EQ(Decoded(t, *with_bos), "the model");

  IncrementalDetokenizer detokenizer(&t);
  auto delta = detokenizer.Add(std::vector<int>{3, t.vocab_size()});
  EXPECT_EQ(delta.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(detokenizer.Flush(), "");  // The rejected call left nothing behind.
}

TEST_P(TrainedTokenizerTest, RoundTripAndStreaming) {
  const Tokenizer& t = tokenizer();
  std::mt19937 random(3);
  const std::string texts[] = {"the model",
                               " leading space",
                               "  two leading",
                               "def f(x):\n    return x + 1\n",
                               "tab\there",
                               "trailing  ",
                               kMultilingual,
                               "",
                               "\n\n",
                               "€",
                               "🎉"};
  for (const std::string& text : texts) {
    auto ids = t.Encode(text, /*add_bos=*/false);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(Decoded(t, *ids), text);
    auto with_bos = t.Encode(text, /*add_bos=*/true);
    ASSERT_TRUE(with_bos.ok());
    EXPECT_EQ(Decoded(t, *with_bos), text);
    for (int max_chunk : {1, 2, 5}) {
      EXPECT_EQ(Stream(t, *ids, max_chunk, &random), text) << "chunks " << max_chunk;
      EXPECT_EQ(Stream(t, *with_bos, max_chunk, &random), text) << "chunks " << max_chunk;
    }
  }
}

TEST_P(TrainedTokenizerTest, ByteFallbackIsHeldBackUntilTheCharacterIsComplete) {
  const Tokenizer& t = tokenizer();
  auto ids = t.Encode(kMultilingual, false);
  ASSERT_TRUE(ids.ok());
  int byte_tokens = 0;
  for (int id : *ids) byte_tokens += t.ByteValue(id) >= 0;
  EXPECT_GT(byte_tokens, 20);  // The CJK, Greek, emoji text needs byte fallback.
  std::mt19937 random(5);
  int empty_deltas = 0;
  EXPECT_EQ(Stream(t, *ids, 1, &random, &empty_deltas), kMultilingual);
  EXPECT_GT(empty_deltas, 0);

  // "€" = E2 82 AC spelled with byte pieces, after visible text and at the start.
  for (bool after_text : {true, false}) {
    IncrementalDetokenizer detokenizer(&t);
    std::string prefix;
    if (after_text) {
      auto word = t.Encode("the", false);
      ASSERT_TRUE(word.ok());
      auto delta = detokenizer.Add(*word);
      ASSERT_TRUE(delta.ok());
      prefix = *delta;
      EXPECT_EQ(prefix, "the");
    }
    const std::vector<int> euro = ByteIds(t, "\xE2\x82\xAC");
    auto first = detokenizer.Add(euro[0]);
    auto second = detokenizer.Add(euro[1]);
    auto third = detokenizer.Add(euro[2]);
    ASSERT_TRUE(first.ok() && second.ok() && third.ok());
    EXPECT_EQ(*first, "");
    EXPECT_EQ(*second, "");
    EXPECT_EQ(*third, "\xE2\x82\xAC");
    EXPECT_EQ(detokenizer.Flush(), "");
  }
}

TEST_P(TrainedTokenizerTest, InvalidByteSequencesMatchDecode) {
  const Tokenizer& t = tokenizer();
  std::mt19937 random(11);
  const auto word = t.Encode("model", false);
  ASSERT_TRUE(word.ok());
  const std::string byte_strings[] = {
      "\x80",                  // Lone continuation.
      "\xE4\xB8",              // Truncated, then the stream ends.
      "\xF0\x9F\x8E",          // Truncated emoji.
      "\xC0\x80",              // Overlong.
      "\xED\xA0\x80",          // Surrogate.
      "\xE4\xB8\xE4\xB8\x96",  // Broken sequence followed by a good one.
      "\xFF\xFE",
  };
  for (const std::string& bytes : byte_strings) {
    std::vector<int> ids = ByteIds(t, bytes);
    for (int ending : {0, 1}) {
      std::vector<int> stream = ids;
      if (ending == 1) stream.insert(stream.end(), word->begin(), word->end());
      const std::string expected = Decoded(t, stream);
      EXPECT_TRUE(IsValidUtf8(expected));
      for (int max_chunk : {1, 3}) {
        EXPECT_EQ(Stream(t, stream, max_chunk, &random), expected);
      }
    }
  }
}

TEST_P(TrainedTokenizerTest, RandomIdSequencesStreamLikeDecode) {
  const Tokenizer& t = tokenizer();
  std::mt19937 random(101 + GetParam().size());
  // Ids biased towards the awkward ones: control, byte pieces and "▁"-led pieces.
  std::vector<int> byte_ids, space_ids;
  for (int id = 0; id < t.vocab_size(); ++id) {
    if (t.ByteValue(id) >= 0) byte_ids.push_back(id);
    if (t.IdToPiece(id).rfind("\xE2\x96\x81", 0) == 0) space_ids.push_back(id);
  }
  ASSERT_FALSE(space_ids.empty());
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int> ids;
    const int length = static_cast<int>(random() % 24);
    for (int i = 0; i < length; ++i) {
      switch (random() % 5) {
        case 0:
          ids.push_back(byte_ids[random() % byte_ids.size()]);
          break;
        case 1:
          ids.push_back(space_ids[random() % space_ids.size()]);
          break;
        case 2:
          ids.push_back(static_cast<int>(random() % 3));
          break;   // unk, bos, eos
        case 3: {  // A well-formed multi-byte character as byte pieces.
          const std::vector<int> euro = ByteIds(t, "\xE2\x82\xAC");
          ids.insert(ids.end(), euro.begin(), euro.end());
          break;
        }
        default:
          ids.push_back(static_cast<int>(random() % t.vocab_size()));
      }
    }
    const std::string expected = Decoded(t, ids);
    ASSERT_EQ(Stream(t, ids, 1 + trial % 4, &random), expected) << "trial " << trial;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TrainedTokenizerTest,
                         ::testing::Values("bpe_dummy_prefix", "bpe_no_dummy_prefix",
                                           "bpe_unused"));

// --- The bundled target tokenizer and its expected ids ------------------------

// GPT-2's byte-level alphabet, written out independently of the tokenizer's table:
// printable bytes stand for themselves, the others for U+0100, U+0101, ... in order.
std::string ByteLevelSpelling(int byte) {
  int extra = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int code_point = printable ? b : extra++;
    if (b != byte) continue;
    if (code_point < 0x80) return std::string(1, static_cast<char>(code_point));
    return {static_cast<char>(0xC0 | (code_point >> 6)),
            static_cast<char>(0x80 | (code_point & 0x3F))};
  }
  return "";
}

// A directory with a byte-level tokenizer.json: every byte is a token (ids 0..255),
// plus "a" followed by the first byte of "中" (id 256) and the special <|end|> (257).
std::string WriteByteLevelTokenizer(const std::string& name) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int byte = 0; byte < 256; ++byte) vocab[ByteLevelSpelling(byte)] = byte;
  const std::string a_lead = "a" + ByteLevelSpelling(0xE4);
  vocab[a_lead] = 256;
  const nlohmann::json spec = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a " + ByteLevelSpelling(0xE4)}}}},
      {"added_tokens",
       {{{"id", 257}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
  };
  const std::string dir = TempDir() + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/tokenizer.json") << spec.dump();
  std::ofstream(dir + "/tokenizer_config.json") << R"({"eos_token": "<|end|>"})";
  return dir;
}

TEST(TokenizerJsonTest, DirectoryPrefersTokenizerJsonOverTokenizerModel) {
  const std::string dir = WriteByteLevelTokenizer("both_formats");
  std::ofstream(dir + "/tokenizer.model", std::ios::binary)
      << testing::ReadFile(std::string(kTestModels) + "bpe_dummy_prefix.model");
  auto from_json = Tokenizer::Load(dir);
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(from_json->vocab_size(), 258);
  EXPECT_EQ(from_json->eos_id(), 257);
  EXPECT_EQ(from_json->bos_id(), -1);
  EXPECT_TRUE(from_json->PieceToId("<|end|>") == 257 && from_json->IsControl(257));
  auto file = Tokenizer::Load(dir + "/tokenizer.json");
  EXPECT_TRUE(file.ok() && file->vocab_size() == 258) << file.status();
  ASSERT_EQ(std::remove((dir + "/tokenizer.json").c_str()), 0);
  auto from_model = Tokenizer::Load(dir);
  ASSERT_TRUE(from_model.ok()) << from_model.status();
  EXPECT_EQ(from_model->vocab_size(), TestTokenizer("bpe_dummy_prefix").vocab_size());
}

TEST(TokenizerJsonTest, BrokenTokenizerJsonIsAnError) {
  const std::string dir = TempDir() + "/broken_json";
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/tokenizer.json") << R"({"model": {"type": "Unigram"}})";
  auto status = Tokenizer::Load(dir).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(dir + "/tokenizer.json"));
  EXPECT_THAT(status.message(), HasSubstr("model type \"Unigram\" is not supported"));
}

// A token that ends inside a character ("a" + the first byte of "中") is held back
// until the character is complete; every delta is valid UTF-8.
TEST(TokenizerJsonTest, StreamingNeverSplitsACharacter) {
  auto tokenizer = Tokenizer::Load(WriteByteLevelTokenizer("streaming"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto ids = tokenizer->Encode("a中<|end|>", /*add_bos=*/true);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ::testing::ElementsAre(256, 0xB8, 0xAD, 257));
  IncrementalDetokenizer detokenizer(&*tokenizer);
  EXPECT_EQ(*detokenizer.Add(256), "");
  EXPECT_EQ(*detokenizer.Add(0xB8), "");
  EXPECT_EQ(*detokenizer.Add(0xAD), "a中");
  EXPECT_EQ(*detokenizer.Add(257), "");
  EXPECT_EQ(detokenizer.Flush(), "");
  // Random chunks of a multilingual text: deltas valid, their concatenation = Decode.
  ids = tokenizer->Encode(kMultilingual, /*add_bos=*/false);
  ASSERT_TRUE(ids.ok());
  std::mt19937 random(7);
  for (int max_chunk : {1, 2, 5}) {
    EXPECT_EQ(Stream(*tokenizer, *ids, max_chunk, &random), kMultilingual);
  }
  // A character cut short at the end of the stream: Flush gives U+FFFD, as Decode does.
  IncrementalDetokenizer cut(&*tokenizer);
  EXPECT_EQ(*cut.Add(256), "");
  EXPECT_EQ(cut.Flush(), Decoded(*tokenizer, {256}));
  EXPECT_EQ(Decoded(*tokenizer, {256}), "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace tandem
