#include "model/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace tandem {
namespace {

using ::testing::HasSubstr;

// A complete, valid config (Llama-2-7B sizes) with `extra` spliced in; later keys win
// in our parser, so `extra` can override any field.
std::string Config(const std::string& extra = "") {
  std::string text = R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32,
    "rms_norm_eps": 1e-05, "max_position_embeddings": 4096,
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float16")";
  if (!extra.empty()) text += ", " + extra;
  return text + "}";
}

absl::StatusOr<LlamaConfig> Parse(const std::string& text) {
  return ParseLlamaConfig(text, "dir/config.json");
}

void ExpectError(const std::string& text, const std::string& expected_substring) {
  auto config = Parse(text);
  ASSERT_FALSE(config.ok()) << "accepted: " << text;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("dir/config.json"));
  EXPECT_THAT(config.status().message(), HasSubstr(expected_substring));
}

TEST(ConfigTest, ParsesLlama2WithDefaults) {
  auto config = Parse(Config());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "LlamaForCausalLM");
  EXPECT_EQ(config->vocab_size, 32000);
  EXPECT_EQ(config->hidden_size, 4096);
  EXPECT_EQ(config->intermediate_size, 11008);
  EXPECT_EQ(config->num_layers, 32);
  EXPECT_EQ(config->num_heads, 32);
  EXPECT_EQ(config->num_kv_heads, 32);  // Defaults to num_attention_heads.
  EXPECT_EQ(config->head_dim, 128);     // hidden_size / num_heads.
  EXPECT_FLOAT_EQ(config->rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(config->rope_theta, 10000.0f);
  EXPECT_EQ(config->rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_FALSE(config->tie_word_embeddings);
  EXPECT_EQ(config->max_position_embeddings, 4096);
  EXPECT_EQ(config->bos_token_id, 1);
  EXPECT_EQ(config->eos_token_ids, std::vector<int>({2}));
  EXPECT_EQ(config->torch_dtype, "float16");
  // Published parameter count of Llama-2-7B.
  EXPECT_EQ(config->NumParameters(), 6738415616LL);
}

TEST(ConfigTest, ParsesLlama3WithGqaScalingAndEosList) {
  auto config = Parse(R"({
    "architectures": ["LlamaForCausalLM"], "vocab_size": 128256, "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "rope_theta": 500000.0, "max_position_embeddings": 131072,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
    "tie_word_embeddings": false, "torch_dtype": "bfloat16"})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_kv_heads, 8);
  EXPECT_FLOAT_EQ(config->rope_theta, 500000.0f);
  EXPECT_EQ(config->rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(config->rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(config->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(config->rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(config->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(config->eos_token_ids, std::vector<int>({128001, 128008, 128009}));
  // Published parameter count of Llama-3-8B.
  EXPECT_EQ(config->NumParameters(), 8030261248LL);
}

TEST(ConfigTest, TiedEmbeddingsExplicitHeadDimAndMistral) {
  auto config = Parse(R"({"architectures": ["MistralForCausalLM"], "vocab_size": 100,
    "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
    "tie_word_embeddings": true, "sliding_window": 512,
    "max_position_embeddings": 4096, "rope_scaling": null, "eos_token_id": 3})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "MistralForCausalLM");
  EXPECT_EQ(config->head_dim, 8);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_EQ(config->max_position_embeddings, 512);  // Capped at the sliding window.
  // Counted by hand: embeddings 100*64; norms 64 + 2*(2*64); q 64*32, k and v 64*16
  // each, o 32*64, MLP 3*64*96 per layer.
  const long long per_layer = 2 * 64 + 64 * 32 + 2 * 64 * 16 + 32 * 64 + 3 * 64 * 96;
  EXPECT_EQ(config->NumParameters(), 100 * 64 + 64 + 2 * per_layer);
}

TEST(ConfigTest, ModelTypeAloneIsEnoughAndLinearScalingUsesType) {
  auto config = Parse(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8,
    "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "bos_token_id": 0, "eos_token_id": 1,
    "rope_scaling": {"type": "linear", "factor": 2.5}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "LlamaForCausalLM");
  EXPECT_EQ(config->rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(config->rope_scaling.factor, 2.5f);
  EXPECT_EQ(config->max_position_embeddings, 2048);  // Default.
}

TEST(ConfigTest, RejectsMalformedJson) {
  ExpectError("{\"vocab_size\": 3", "not valid JSON");
  ExpectError("", "not valid JSON");
  ExpectError("[1, 2]", "expected a JSON object");
}

TEST(ConfigTest, RejectsWrongArchitecture) {
  ExpectError(Config(R"("architectures": ["GPT2LMHeadModel"])"), "\"architectures\"");
  ExpectError(Config(R"("architectures": "LlamaForCausalLM")"), "list of strings");
  ExpectError(Config(R"("model_type": "gpt2")"), "\"model_type\"");
  ExpectError(R"({"vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2})",
              "cannot tell whether this is a Llama-family model");
}

TEST(ConfigTest, RejectsMissingAndOutOfRangeSizes) {
  ExpectError(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8})",
              "field \"vocab_size\" is missing");
  ExpectError(Config(R"("hidden_size": -4096)"), "field \"hidden_size\" is -4096");
  ExpectError(Config(R"("num_hidden_layers": 0)"), "field \"num_hidden_layers\" is 0");
  ExpectError(Config(R"("intermediate_size": 11008.5)"),
              "field \"intermediate_size\" must be an integer");
  ExpectError(Config(R"("vocab_size": "32000")"), "field \"vocab_size\" must be an integer");
  ExpectError(Config(R"("vocab_size": 99999999999999999999)"), "\"vocab_size\"");
  ExpectError(Config(R"("max_position_embeddings": 0)"), "\"max_position_embeddings\"");
}

TEST(ConfigTest, RejectsInconsistentHeads) {
  ExpectError(Config(R"("num_key_value_heads": 5)"),
              "\"num_key_value_heads\" (5) must divide num_attention_heads (32)");
  ExpectError(Config(R"("num_attention_heads": 3, "num_key_value_heads": 1)"),
              "(4096) is not divisible by num_attention_heads (3)");
  ExpectError(Config(R"("head_dim": 127)"), "\"head_dim\" (127) must be even");
  ExpectError(Config(R"("head_dim": 0)"), "\"head_dim\" is 0");
}

TEST(ConfigTest, RejectsBadNumbersAndTokens) {
  ExpectError(Config(R"("rms_norm_eps": -1e-5)"), "\"rms_norm_eps\" must be a positive");
  ExpectError(Config(R"("rope_theta": "big")"), "\"rope_theta\" must be a number");
  ExpectError(Config(R"("tie_word_embeddings": 1)"), "\"tie_word_embeddings\" must be");
  ExpectError(Config(R"("eos_token_id": [])"), "\"eos_token_id\" is an empty list");
  ExpectError(Config(R"("eos_token_id": [2, "x"])"), "\"eos_token_id\" must be an integer");
  ExpectError(Config(R"("eos_token_id": 32000)"), "(32000) is not below vocab_size");
  ExpectError(Config(R"("bos_token_id": -1)"), "\"bos_token_id\" is -1");
  ExpectError(Config(R"("torch_dtype": 16)"), "\"torch_dtype\" must be a string");
}

TEST(ConfigTest, RejectsUnsupportedFeatures) {
  ExpectError(Config(R"("attention_bias": true)"), "biases are not supported");
  ExpectError(Config(R"("hidden_act": "gelu")"), "only \"silu\"");
}

TEST(ConfigTest, RejectsBadRopeScaling) {
  ExpectError(Config(R"("rope_scaling": {"rope_type": "dynamic", "factor": 2.0})"),
              "\"rope_scaling.rope_type\" has type \"dynamic\"");
  ExpectError(Config(R"("rope_scaling": {"type": "yarn", "factor": 2.0})"),
              "\"rope_scaling.type\" has type \"yarn\"");
  ExpectError(Config(R"("rope_scaling": {"factor": 2.0})"),
              "\"rope_scaling.rope_type\" is missing");
  ExpectError(Config(R"("rope_scaling": {"rope_type": "linear"})"),
              "\"rope_scaling.factor\" is missing");
  ExpectError(Config(R"("rope_scaling": {"rope_type": "linear", "factor": 0})"),
              "\"rope_scaling.factor\" must be a positive number");
  ExpectError(Config(R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0})"),
              "\"rope_scaling.original_max_position_embeddings\" is missing");
  ExpectError(Config(R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0,
      "low_freq_factor": 4.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192})"),
              "\"rope_scaling.low_freq_factor\" (4) must be below high_freq_factor (4)");
  ExpectError(Config(R"("rope_scaling": 2.0)"), "must be null or an object");
}

TEST(ConfigTest, LoadReportsMissingFile) {
  auto config = LoadLlamaConfig("/nonexistent/model");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("/nonexistent/model/config.json"));
}

LlamaConfig RopeConfig(int head_dim, float theta) {
  LlamaConfig config;
  config.head_dim = head_dim;
  config.rope_theta = theta;
  return config;
}

TEST(RopeTest, DefaultFrequenciesByHand) {
  // head_dim 4, theta 10000: f_0 = 1, f_1 = 10000^(-1/2) = 0.01.
  const auto frequencies = RopeInverseFrequencies(RopeConfig(4, 10000.0f));
  ASSERT_EQ(frequencies.size(), 2u);
  EXPECT_FLOAT_EQ(frequencies[0], 1.0f);
  EXPECT_FLOAT_EQ(frequencies[1], 0.01f);
}

TEST(RopeTest, LinearScalingDividesByFactor) {
  LlamaConfig config = RopeConfig(4, 10000.0f);
  config.rope_scaling.type = RopeScaling::Type::kLinear;
  config.rope_scaling.factor = 4.0f;
  const auto frequencies = RopeInverseFrequencies(config);
  EXPECT_FLOAT_EQ(frequencies[0], 0.25f);
  EXPECT_FLOAT_EQ(frequencies[1], 0.0025f);
}

TEST(RopeTest, Llama3ThreeBandsByHand) {
  // theta 10000, head_dim 6: f = 1, 10000^(-1/3) = 0.0464159, 10000^(-2/3) = 0.00215443
  // with wavelengths 6.28, 135.4 and 2916.4. With original 1000, low 1, high 4 the
  // bands are: high (< 250), medium [250, 1000], low (> 1000).
  LlamaConfig config = RopeConfig(6, 10000.0f);
  config.rope_scaling = {RopeScaling::Type::kLlama3, 8.0f, 1.0f, 4.0f, 1000};
  auto frequencies = RopeInverseFrequencies(config);
  ASSERT_EQ(frequencies.size(), 3u);
  EXPECT_FLOAT_EQ(frequencies[0], 1.0f);                   // unchanged
  EXPECT_FLOAT_EQ(frequencies[1], 0.0464158883f);          // unchanged
  EXPECT_FLOAT_EQ(frequencies[2], 0.00215443469f / 8.0f);  // divided by factor

  // head_dim 4: f_1 = 0.01 has wavelength 628.3, in the medium band. Smooth factor
  // s = (1000 / 628.3185 - 1) / 3 = 0.1971834; f = (1 - s) * 0.01 / 8 + s * 0.01,
  // evaluated separately to 0.002975352506846947.
  config.head_dim = 4;
  frequencies = RopeInverseFrequencies(config);
  EXPECT_FLOAT_EQ(frequencies[0], 1.0f);
  EXPECT_FLOAT_EQ(frequencies[1], 0.002975352506846947f);
}

// Hugging Face's vectorised formulation (_compute_llama3_parameters), in double.
std::vector<double> ReferenceLlama3(int head_dim, double theta, double factor, double low,
                                    double high, double original) {
  std::vector<double> out;
  for (int i = 0; i < head_dim; i += 2) {
    const double inv_freq = 1.0 / std::pow(theta, static_cast<double>(i) / head_dim);
    const double wavelen = 2 * M_PI / inv_freq;
    double llama = wavelen > original / low ? inv_freq / factor : inv_freq;
    const double smooth = (original / wavelen - low) / (high - low);
    const double smoothed = (1 - smooth) * llama / factor + smooth * llama;
    const bool medium = !(wavelen < original / high) && !(wavelen > original / low);
    out.push_back(medium ? smoothed : llama);
  }
  return out;
}

TEST(RopeTest, Llama31MatchesReferenceFormulation) {
  LlamaConfig config = RopeConfig(128, 500000.0f);
  config.rope_scaling = {RopeScaling::Type::kLlama3, 8.0f, 1.0f, 4.0f, 8192};
  const auto frequencies = RopeInverseFrequencies(config);
  const auto reference = ReferenceLlama3(128, 500000.0, 8.0, 1.0, 4.0, 8192.0);
  ASSERT_EQ(frequencies.size(), reference.size());
  int low = 0, medium = 0, high = 0;
  for (size_t j = 0; j < reference.size(); ++j) {
    EXPECT_NEAR(frequencies[j], reference[j], 1e-7 * reference[j]) << "j=" << j;
    const double original = 1.0 / std::pow(500000.0, 2.0 * j / 128);
    if (std::abs(reference[j] - original) < 1e-12 * original)
      ++high;
    else if (std::abs(reference[j] - original / 8) < 1e-12 * original)
      ++low;
    else
      ++medium;
  }
  // The configuration exercises all three bands.
  EXPECT_GT(low, 0);
  EXPECT_GT(medium, 0);
  EXPECT_GT(high, 0);
}

}  // namespace
}  // namespace tandem
