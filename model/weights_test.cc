#include "model/weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/float16.h"
#include "model/safetensors_writer.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

std::string MakeDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(root != nullptr ? root : "/tmp") + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

// --- A synthetic checkpoint whose every element is known --------------------

// Sizes of the synthetic model: tp 2 divides every split dimension.
constexpr int kVocab = 8, kHidden = 6, kInter = 8, kLayers = 2, kHeads = 4, kKvHeads = 2,
              kHeadDim = 2;

// Element (i, j) of tensor number `t`: small integers, exact in f16 and bf16.
float Value(int t, int64_t i, int64_t j) {
  return static_cast<float>((t * 31 + i * 7 + j * 3) % 61 - 30);
}

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

std::vector<TensorSpec> SyntheticTensors(bool tied) {
  std::vector<TensorSpec> specs = {{"model.embed_tokens.weight", {kVocab, kHidden}},
                                   {"model.norm.weight", {kHidden}}};
  if (!tied) specs.push_back({"lm_head.weight", {kVocab, kHidden}});
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    specs.push_back({p + "input_layernorm.weight", {kHidden}});
    specs.push_back({p + "post_attention_layernorm.weight", {kHidden}});
    specs.push_back({p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden}});
    specs.push_back({p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden}});
    specs.push_back({p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden}});
    specs.push_back({p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}});
    specs.push_back({p + "mlp.gate_proj.weight", {kInter, kHidden}});
    specs.push_back({p + "mlp.up_proj.weight", {kInter, kHidden}});
    specs.push_back({p + "mlp.down_proj.weight", {kHidden, kInter}});
  }
  return specs;
}

struct SyntheticOptions {
  SafetensorsDType dtype = SafetensorsDType::kF32;
  bool tied = false;
  std::string drop;          // Tensor left out.
  std::string reshape;       // Tensor written with shape {3, 3}.
  std::string int_tensor;    // Tensor written as I32.
  bool misalign = false;     // Data buffer at an odd file offset.
  std::string config_extra;  // Appended to config.json.
};

std::string WriteSynthetic(const std::string& name, const SyntheticOptions& options) {
  const std::string dir = MakeDir(name);
  const std::string config =
      absl::StrCat(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": )", kVocab,
                   R"(, "hidden_size": )", kHidden, R"(, "intermediate_size": )", kInter,
                   R"(, "num_hidden_layers": )", kLayers, R"(, "num_attention_heads": )", kHeads,
                   R"(, "num_key_value_heads": )", kKvHeads, R"(, "head_dim": )", kHeadDim,
                   R"(, "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": )",
                   options.tied ? "true" : "false", options.config_extra, "}");
  EXPECT_TRUE(WriteBinaryFile(dir + "/config.json", config).ok());
  std::vector<SafetensorsTensorData> tensors;
  const auto specs = SyntheticTensors(options.tied);
  for (size_t t = 0; t < specs.size(); ++t) {
    const TensorSpec& spec = specs[t];
    if (spec.name == options.drop) continue;
    const int64_t rows = spec.shape.size() == 2 ? spec.shape[0] : 1;
    const int64_t cols = spec.shape.back();
    std::vector<float> values;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) values.push_back(Value(t, i, j));
    }
    SafetensorsTensorData data{spec.name, options.dtype, spec.shape,
                               FloatBytes(values, options.dtype)};
    if (spec.name == options.reshape) {
      data.shape = {3, 3};
      data.bytes = FloatBytes(std::vector<float>(9, 1.0f), options.dtype);
    }
    if (spec.name == options.int_tensor) {
      data.dtype = SafetensorsDType::kI32;
      data.bytes = FloatBytes(values, SafetensorsDType::kF32);  // 4 bytes per element.
    }
    tensors.push_back(std::move(data));
  }
  std::string file = SerializeSafetensors(tensors);
  if (options.misalign) {
    // Re-pad the header so that the data buffer starts at an odd offset.
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(file[i]);
    std::string header = file.substr(8, length);
    while (!header.empty() && header.back() == ' ') header.pop_back();
    while (header.size() % 8 != 1) header.push_back(' ');
    file = AssembleSafetensors(header, file.substr(8 + length));
  }
  EXPECT_TRUE(WriteBinaryFile(dir + "/model.safetensors", file).ok());
  return dir;
}

// Expects `tensor` to hold global rows [row0, row0 + rows) and columns
// [col0, col0 + cols) of synthetic tensor number `t`.
void ExpectSlice(const HostTensor& tensor, int t, int64_t rows, int64_t cols, int64_t row0,
                 int64_t col0, const std::string& what) {
  ASSERT_EQ(tensor.rows, rows) << what;
  ASSERT_EQ(tensor.cols, cols) << what;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      ASSERT_EQ(tensor.At(i, j), Value(t, row0 + i, col0 + j))
          << what << " (" << i << ", " << j << ")";
    }
  }
}

bool InsideMapping(const HostTensor& tensor, const HostTensor& mapped) {
  return tensor.owner.get() == mapped.owner.get();
}

TEST(WeightsTest, SyntheticSlicesHoldTheRightElements) {
  for (SafetensorsDType dtype :
       {SafetensorsDType::kF32, SafetensorsDType::kF16, SafetensorsDType::kBF16}) {
    SyntheticOptions options;
    options.dtype = dtype;
    const std::string dir =
        WriteSynthetic(absl::StrCat("synthetic_", SafetensorsDTypeName(dtype)), options);
    const DType expected_dtype = dtype == SafetensorsDType::kF32   ? DType::kF32
                                 : dtype == SafetensorsDType::kF16 ? DType::kF16
                                                                   : DType::kBF16;
    for (int tp : {1, 2}) {
      for (int rank = 0; rank < tp; ++rank) {
        auto weights = LoadLlamaWeights(dir, rank, tp);
        ASSERT_TRUE(weights.ok()) << weights.status();
        const std::string what =
            absl::StrCat(SafetensorsDTypeName(dtype), " tp ", tp, " rank ", rank);
        EXPECT_EQ(weights->tp_rank, rank);
        EXPECT_EQ(weights->tp_size, tp);
        EXPECT_EQ(weights->config.vocab_size, kVocab);
        EXPECT_EQ(weights->embed_tokens.dtype, expected_dtype);
        ExpectSlice(weights->embed_tokens, 0, kVocab, kHidden, 0, 0, what + " embed");
        ExpectSlice(weights->final_norm, 1, 1, kHidden, 0, 0, what + " norm");
        const int64_t vocab_rows = kVocab / tp;
        EXPECT_EQ(weights->vocab_begin, rank * vocab_rows);
        ExpectSlice(weights->lm_head, 2, vocab_rows, kHidden, rank * vocab_rows, 0,
                    what + " lm_head");
        ASSERT_EQ(weights->layers.size(), static_cast<size_t>(kLayers));
        const int64_t q = kHeads * kHeadDim / tp, kv = kKvHeads * kHeadDim / tp, mlp = kInter / tp;
        for (int l = 0; l < kLayers; ++l) {
          const LayerWeights& layer = weights->layers[l];
          const int t = 3 + 9 * l;  // Index of input_layernorm in SyntheticTensors.
          const std::string lw = what + " layer " + std::to_string(l);
          ExpectSlice(layer.input_norm, t, 1, kHidden, 0, 0, lw + " input_norm");
          ExpectSlice(layer.post_attn_norm, t + 1, 1, kHidden, 0, 0, lw + " post_norm");
          ExpectSlice(layer.q_proj, t + 2, q, kHidden, rank * q, 0, lw + " q");
          ExpectSlice(layer.k_proj, t + 3, kv, kHidden, rank * kv, 0, lw + " k");
          ExpectSlice(layer.v_proj, t + 4, kv, kHidden, rank * kv, 0, lw + " v");
          ExpectSlice(layer.o_proj, t + 5, kHidden, q, 0, rank * q, lw + " o");
          ExpectSlice(layer.gate_proj, t + 6, mlp, kHidden, rank * mlp, 0, lw + " gate");
          ExpectSlice(layer.up_proj, t + 7, mlp, kHidden, rank * mlp, 0, lw + " up");
          ExpectSlice(layer.down_proj, t + 8, kHidden, mlp, 0, rank * mlp, lw + " down");
          // Column-parallel slices are views into the mapping; row-parallel slices are
          // copies when split.
          EXPECT_TRUE(InsideMapping(layer.q_proj, weights->embed_tokens)) << lw;
          EXPECT_TRUE(InsideMapping(layer.gate_proj, weights->embed_tokens)) << lw;
          EXPECT_EQ(InsideMapping(layer.o_proj, weights->embed_tokens), tp == 1) << lw;
          EXPECT_EQ(InsideMapping(layer.down_proj, weights->embed_tokens), tp == 1) << lw;
          EXPECT_EQ(layer.o_proj.dtype, expected_dtype);
        }
      }
    }
  }
}

TEST(WeightsTest, TiedHeadIsAViewOfTheEmbeddingSlice) {
  SyntheticOptions options;
  options.tied = true;
  options.dtype = SafetensorsDType::kBF16;
  const std::string dir = WriteSynthetic("synthetic_tied", options);
  auto weights = LoadLlamaWeights(dir, 1, 2);
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(weights->vocab_begin, kVocab / 2);
  EXPECT_EQ(weights->lm_head.data,
            static_cast<const uint8_t*>(weights->embed_tokens.data) + (kVocab / 2) * kHidden * 2);
  ExpectSlice(weights->lm_head, 0, kVocab / 2, kHidden, kVocab / 2, 0, "tied lm_head");
}

TEST(WeightsTest, MisalignedDataIsCopiedToAlignedMemory) {
  SyntheticOptions options;
  options.misalign = true;
  const std::string dir = WriteSynthetic("synthetic_misaligned", options);
  auto weights = LoadLlamaWeights(dir, 0, 1);
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(weights->embed_tokens.data) % 4, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(weights->layers[1].q_proj.data) % 4, 0u);
  ExpectSlice(weights->embed_tokens, 0, kVocab, kHidden, 0, 0, "embed");
  ExpectSlice(weights->layers[1].q_proj, 14, kHeads * kHeadDim, kHidden, 0, 0, "q");
}

absl::Status LoadError(const std::string& dir, int rank = 0, int tp = 1) {
  auto weights = LoadLlamaWeights(dir, rank, tp);
  return weights.ok() ? absl::OkStatus() : weights.status();
}

TEST(WeightsTest, MissingTensorWrongShapeAndDtype) {
  SyntheticOptions options;
  options.drop = "model.layers.1.mlp.up_proj.weight";
  std::string dir = WriteSynthetic("synthetic_missing", options);
  absl::Status status = LoadError(dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(dir));
  EXPECT_THAT(status.message(), HasSubstr("\"model.layers.1.mlp.up_proj.weight\""));

  options = SyntheticOptions();
  options.drop = "lm_head.weight";
  status = LoadError(WriteSynthetic("synthetic_no_head", options));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("\"lm_head.weight\""));

  options = SyntheticOptions();
  options.reshape = "model.layers.0.self_attn.k_proj.weight";
  dir = WriteSynthetic("synthetic_reshaped", options);
  status = LoadError(dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr(dir + "/model.safetensors: tensor "
                              "\"model.layers.0.self_attn.k_proj.weight\": expected shape "
                              "[4, 6], found [3, 3]"));

  options = SyntheticOptions();
  options.reshape = "model.norm.weight";
  status = LoadError(WriteSynthetic("synthetic_bad_norm", options));
  EXPECT_THAT(status.message(), HasSubstr("expected shape [6], found [3, 3]"));

  options = SyntheticOptions();
  options.int_tensor = "model.layers.0.mlp.gate_proj.weight";
  status = LoadError(WriteSynthetic("synthetic_int", options));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("\"model.layers.0.mlp.gate_proj.weight\": dtype I32 is not "
                        "supported (expected F32, F16, BF16, I8 for q8_0 or U8 for q4_0)"));
}

TEST(WeightsTest, TensorParallelArgumentErrors) {
  const std::string dir = WriteSynthetic("synthetic_tp_errors", SyntheticOptions());
  absl::Status status = LoadError(dir, 0, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor parallel size must be at least 1, got 0"));
  status = LoadError(dir, 2, 2);
  EXPECT_THAT(status.message(), HasSubstr("tensor parallel rank 2 is outside [0, 2)"));
  status = LoadError(dir, -1, 2);
  EXPECT_THAT(status.message(), HasSubstr("tensor parallel rank -1 is outside [0, 2)"));
  status = LoadError(dir, 0, 3);  // 2 KV heads: neither divides the other.
  EXPECT_THAT(status.message(),
              HasSubstr("num_key_value_heads (2) must be divisible by the tensor parallel "
                        "size 3, or the size by it"));

  SyntheticOptions options;
  options.config_extra = R"(, "num_attention_heads": 6, "num_key_value_heads": 2)";
  status = LoadError(WriteSynthetic("synthetic_six_heads", options), 0, 4);
  EXPECT_THAT(status.message(),
              HasSubstr("num_attention_heads (6) is not divisible by the tensor parallel "
                        "size 4"));
  options.config_extra = R"(, "num_attention_heads": 2, "num_key_value_heads": 2,
                              "head_dim": 4, "intermediate_size": 7)";
  status = LoadError(WriteSynthetic("synthetic_odd_mlp", options), 0, 2);
  EXPECT_THAT(status.message(),
              HasSubstr("intermediate_size (7) is not divisible by the tensor parallel "
                        "size 2"));
  options.config_extra = R"(, "vocab_size": 9)";
  status = LoadError(WriteSynthetic("synthetic_odd_vocab", options), 1, 2);
  EXPECT_THAT(status.message(),
              HasSubstr("vocab_size (9) is not divisible by the tensor parallel size 2"));
}

TEST(WeightsTest, MissingOrCorruptFiles) {
  const std::string empty = MakeDir("no_config");
  absl::Status status = LoadError(empty);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(empty + "/config.json"));

  const std::string dir = WriteSynthetic("synthetic_truncated", SyntheticOptions());
  {
    auto full = LoadLlamaWeights(dir, 0, 1);
    ASSERT_TRUE(full.ok());
  }
  std::FILE* file = std::fopen((dir + "/model.safetensors").c_str(), "rb");
  ASSERT_NE(file, nullptr);
  std::string content(1 << 16, '\0');
  content.resize(std::fread(&content[0], 1, content.size(), file));
  std::fclose(file);
  ASSERT_TRUE(
      WriteBinaryFile(dir + "/model.safetensors", content.substr(0, content.size() - 10)).ok());
  status = LoadError(dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(dir + "/model.safetensors"));
  EXPECT_THAT(status.message(), HasSubstr("beyond the data buffer"));
}

TEST(HostTensorTest, AtConvertsEachDtype) {
  const float f32[] = {1.5f, -2.0f, 3.25f, 0.0f};
  HostTensor tensor{f32, DType::kF32, 2, 2, nullptr};
  EXPECT_EQ(tensor.At(0, 0), 1.5f);
  EXPECT_EQ(tensor.At(1, 0), 3.25f);
  const uint16_t f16[] = {0x3C00, 0xC000, 0x0001, 0x7C00};  // 1, -2, 2^-24, inf
  tensor = HostTensor{f16, DType::kF16, 1, 4, nullptr};
  EXPECT_EQ(tensor.At(0, 1), -2.0f);
  EXPECT_EQ(tensor.At(0, 2), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(tensor.At(0, 3)));
  const uint16_t bf16[] = {0x3F80, 0x4049, 0xFFC0};  // 1, 3.140625, NaN
  tensor = HostTensor{bf16, DType::kBF16, 3, 1, nullptr};
  EXPECT_EQ(tensor.At(0, 0), 1.0f);
  EXPECT_EQ(tensor.At(1, 0), 3.140625f);
  EXPECT_TRUE(std::isnan(tensor.At(2, 0)));
  EXPECT_DEATH(tensor.At(3, 0), "outside");
}

}  // namespace
}  // namespace tandem
