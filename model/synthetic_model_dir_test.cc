// A synthetic model written as a directory: it loads with the normal loader and equals
// the in-memory synthetic model converted to the same format bitwise, in every format;
// the tokenizer comes along; bad arguments are one clear error and write nothing.
#include "model/synthetic_model_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "model/synthetic_weights.h"
#include "model/test_data.h"
#include "model/tokenizer.h"
#include "model/weight_format.h"
#include "model/weights.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

void ExpectSameTensor(const HostTensor& loaded, const HostTensor& expected,
                      const std::string& what) {
  ASSERT_EQ(loaded.dtype, expected.dtype) << what;
  ASSERT_EQ(loaded.rows, expected.rows) << what;
  ASSERT_EQ(loaded.cols, expected.cols) << what;
  EXPECT_EQ(std::memcmp(loaded.data, expected.data, loaded.numel() * DTypeSize(loaded.dtype)), 0)
      << what;
  if (loaded.dtype == DType::kQ8_0) {
    EXPECT_EQ(
        std::memcmp(loaded.scales, expected.scales, loaded.rows * Q8BlocksPerRow(loaded.cols) * 2),
        0)
        << what << " scales";
  }
}

void ExpectSameWeights(const LlamaWeights& loaded, const LlamaWeights& expected) {
  ExpectSameTensor(loaded.embed_tokens, expected.embed_tokens, "embed_tokens");
  ExpectSameTensor(loaded.final_norm, expected.final_norm, "final_norm");
  ExpectSameTensor(loaded.lm_head, expected.lm_head, "lm_head");
  ASSERT_EQ(loaded.layers.size(), expected.layers.size());
  for (size_t i = 0; i < loaded.layers.size(); ++i) {
    const LayerWeights& a = loaded.layers[i];
    const LayerWeights& b = expected.layers[i];
    const std::string layer = "layer " + std::to_string(i) + " ";
    ExpectSameTensor(a.input_norm, b.input_norm, layer + "input_norm");
    ExpectSameTensor(a.post_attn_norm, b.post_attn_norm, layer + "post_attn_norm");
    ExpectSameTensor(a.q_proj, b.q_proj, layer + "q_proj");
    ExpectSameTensor(a.k_proj, b.k_proj, layer + "k_proj");
    ExpectSameTensor(a.v_proj, b.v_proj, layer + "v_proj");
    ExpectSameTensor(a.o_proj, b.o_proj, layer + "o_proj");
    ExpectSameTensor(a.gate_proj, b.gate_proj, layer + "gate_proj");
    ExpectSameTensor(a.up_proj, b.up_proj, layer + "up_proj");
    ExpectSameTensor(a.down_proj, b.down_proj, layer + "down_proj");
  }
}

// MakeSyntheticWeights("tiny" with `vocab`, seed) converted to `format` in memory.
LlamaWeights Expected(int vocab, DType format, uint64_t seed) {
  auto model = ParseSyntheticModel("tiny");
  EXPECT_TRUE(model.ok());
  model->config.vocab_size = vocab;
  auto weights = MakeSyntheticWeights(*model, seed);
  EXPECT_TRUE(weights.ok()) << weights.status();
  auto converted = ConvertLinearWeights(*weights, format);
  EXPECT_TRUE(converted.ok()) << converted.status();
  return *std::move(converted);
}

TEST(SyntheticModelDirTest, LoadsAsTheInMemoryModelInEveryFormat) {
  for (DType format : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    SCOPED_TRACE(DTypeName(format));
    SyntheticModelDirOptions options;
    options.shape = "tiny";
    options.format = format;
    options.seed = 5;
    const std::string dir = testing::TempPath(std::string("tiny_") + DTypeName(format));
    auto report = WriteSyntheticModelDir(options, dir);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->tensors, 3 + 9 * 2 + (format == DType::kQ8_0 ? 1 + 7 * 2 : 0));
    EXPECT_TRUE(report->copied_files.empty());

    auto loaded = LoadLlamaWeights(dir, 0, 1);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const LlamaConfig& c = loaded->config;
    EXPECT_EQ(c.num_layers, 2);
    EXPECT_EQ(c.hidden_size, 64);
    EXPECT_EQ(c.num_heads, 4);
    EXPECT_EQ(c.num_kv_heads, 2);
    EXPECT_EQ(c.intermediate_size, 128);
    EXPECT_EQ(c.vocab_size, 256);
    ExpectSameWeights(*loaded, Expected(256, format, 5));
    EXPECT_EQ(WeightBytes(*loaded), WeightBytes(Expected(256, format, 5)));
    EXPECT_GE(int64_t(std::filesystem::file_size(dir + "/model.safetensors")),
              report->tensor_bytes);
    EXPECT_THAT(testing::ReadFile(dir + "/config.json"), HasSubstr("NOT A MODEL"));
  }
}

TEST(SyntheticModelDirTest, DeterministicFromTheSeed) {
  SyntheticModelDirOptions options;
  options.shape = "tiny";
  options.format = DType::kQ8_0;
  ASSERT_TRUE(WriteSyntheticModelDir(options, testing::TempPath("seed_a")).ok());
  ASSERT_TRUE(WriteSyntheticModelDir(options, testing::TempPath("seed_b")).ok());
  options.seed = 1;
  ASSERT_TRUE(WriteSyntheticModelDir(options, testing::TempPath("seed_c")).ok());
  const std::string a = testing::ReadFile(testing::TempPath("seed_a/model.safetensors"));
  EXPECT_EQ(a, testing::ReadFile(testing::TempPath("seed_b/model.safetensors")));
  EXPECT_NE(a, testing::ReadFile(testing::TempPath("seed_c/model.safetensors")));
}

TEST(SyntheticModelDirTest, TakesTheTokenizerAndVocabularyOfAModelDirectory) {
  SyntheticModelDirOptions options;
  options.shape = "tiny";
  options.tokenizer_from = "models/target";
  options.format = DType::kBF16;
  const std::string dir = testing::TempPath("with_tokenizer");
  auto report = WriteSyntheticModelDir(options, dir);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->copied_files, UnorderedElementsAre("tokenizer.model", "tokenizer_config.json",
                                                         "generation_config.json"));
  EXPECT_EQ(report->config.vocab_size, 2048);
  EXPECT_EQ(testing::ReadFile(dir + "/tokenizer.model"),
            testing::ReadFile("models/target/tokenizer.model"));
  auto tokenizer = Tokenizer::Load(dir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(tokenizer->vocab_size(), 2048);
  auto loaded = LoadLlamaWeights(dir, 0, 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config.bos_token_id, 1);
  EXPECT_EQ(loaded->config.eos_token_ids, std::vector<int>{2});
  ExpectSameWeights(*loaded, Expected(2048, DType::kBF16, 0));
  // The same vocabulary given explicitly is accepted.
  options.vocab_size = 2048;
  EXPECT_TRUE(WriteSyntheticModelDir(options, testing::TempPath("with_tokenizer_2048")).ok());
}

TEST(SyntheticModelDirTest, BadArgumentsAreOneClearErrorAndWriteNothing) {
  struct Case {
    std::string shape;
    int vocab;
    std::string tokenizer_from;
    absl::StatusCode code;
    std::string message;
  };
  const Case cases[] = {
      {"gpt-2", 0, "", absl::StatusCode::kInvalidArgument, "unknown model 'gpt-2'"},
      {"tiny:0/2", 0, "", absl::StatusCode::kInvalidArgument, "drop the ':R/N'"},
      {"tiny", -5, "", absl::StatusCode::kInvalidArgument, "vocabulary size -5 is negative"},
      {"tiny", 2, "", absl::StatusCode::kInvalidArgument, "eos_token_id"},
      {"tiny", 1000, "models/target", absl::StatusCode::kInvalidArgument,
       "differs from models/target's vocab_size 2048"},
      {"tiny", 0, "no/such/dir", absl::StatusCode::kNotFound, "no/such/dir"},
  };
  for (const Case& c : cases) {
    SyntheticModelDirOptions options;
    options.shape = c.shape;
    options.vocab_size = c.vocab;
    options.tokenizer_from = c.tokenizer_from;
    const std::string dir = testing::TempPath("bad_" + c.shape + std::to_string(c.vocab));
    auto report = WriteSyntheticModelDir(options, dir);
    EXPECT_EQ(report.status().code(), c.code) << report.status();
    EXPECT_THAT(report.status().message(), HasSubstr(c.message));
    EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
  }
  // A directory that holds a model is not overwritten.
  SyntheticModelDirOptions options;
  options.shape = "tiny";
  const std::string dir = testing::TempPath("taken");
  ASSERT_TRUE(WriteSyntheticModelDir(options, dir).ok());
  auto again = WriteSyntheticModelDir(options, dir);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(again.status().message(), HasSubstr("already holds a model"));
}

}  // namespace
}  // namespace tandem
