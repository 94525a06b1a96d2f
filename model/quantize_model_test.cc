#include "model/quantize_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/llama.h"
#include "model/output_consumers.h"
#include "model/safetensors_writer.h"
#include "model/weights.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  return std::string(root != nullptr ? root : "/tmp") + "/" + name;
}

// The bundled target quantized to `format` (q8_0 or q4_0) once for every test.
std::string QuantizedTarget(DType format = DType::kQ8_0) {
  static std::map<DType, std::string> dirs;
  auto [it, inserted] = dirs.try_emplace(format);
  if (inserted) {
    it->second = TempDir(absl::StrCat("target_", DTypeName(format)));
    auto report = QuantizeModelDir("models/target", it->second, format);
    EXPECT_TRUE(report.ok()) << report.status();
    if (report.ok()) {
      EXPECT_EQ(report->quantized_tensors, 4 * 7 + 1);  // Every layer matrix and lm_head.
      EXPECT_LT(report->output_bytes, report->input_bytes * (format == DType::kQ8_0 ? 0.4 : 0.3));
    }
  }
  return it->second;
}

constexpr DType kFormats[] = {DType::kQ8_0, DType::kQ4_0};

std::vector<const HostTensor*> LinearTensors(const LlamaWeights& w) {
  std::vector<const HostTensor*> tensors = {&w.lm_head};
  for (const LayerWeights& l : w.layers) {
    for (const HostTensor* t :
         {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) {
      tensors.push_back(t);
    }
  }
  return tensors;
}

// Every linear matrix loads as q8_0 / q4_0 within half a quantization step of the
// original (step = max |value| of the block / 127, / 7); embedding and norms stay float32.
TEST(QuantizeModelTest, QuantizedTargetLoadsWithinHalfAStep) {
  auto original = LoadLlamaWeights("models/target", 0, 1);
  ASSERT_TRUE(original.ok()) << original.status();
  for (DType format : kFormats) {
    auto quantized = LoadLlamaWeights(QuantizedTarget(format), 0, 1);
    ASSERT_TRUE(quantized.ok()) << quantized.status();
    EXPECT_EQ(quantized->embed_tokens.dtype, DType::kF32);
    EXPECT_EQ(quantized->layers[0].input_norm.dtype, DType::kF32);
    EXPECT_TRUE(std::filesystem::exists(QuantizedTarget(format) + "/tokenizer.model"));
    const float half_steps = format == DType::kQ8_0 ? 254.0f : 14.0f;
    const auto before = LinearTensors(*original), after = LinearTensors(*quantized);
    for (size_t t = 0; t < before.size(); ++t) {
      const HostTensor &a = *before[t], &b = *after[t];
      ASSERT_EQ(b.dtype, format);
      ASSERT_EQ(a.rows, b.rows);
      ASSERT_EQ(a.cols, b.cols);
      for (int64_t i = 0; i < a.rows; ++i) {
        for (int64_t begin = 0; begin < a.cols; begin += kQ8BlockSize) {
          const int64_t end = std::min<int64_t>(a.cols, begin + kQ8BlockSize);
          float max_abs = 0;
          for (int64_t j = begin; j < end; ++j) max_abs = std::max(max_abs, std::fabs(a.At(i, j)));
          for (int64_t j = begin; j < end; ++j) {
            ASSERT_LE(std::fabs(b.At(i, j) - a.At(i, j)), max_abs / half_steps * 1.002f)
                << DTypeName(format) << " tensor " << t << " (" << i << ", " << j << ")";
          }
        }
      }
    }
  }
}

// The q8_0 and q4_0 models (integer kernel: activations quantized per 32-block) stay
// close to a float32 model whose weights are the dequantized values (HostTensor::At):
// every logit within 2 % of the largest |logit| of its row, and the same top-1 token.
TEST(QuantizeModelTest, BlockModelsCloseToFloat32ModelOnDequantizedWeights) {
  for (DType format : kFormats) {
    auto quantized = LoadLlamaWeights(QuantizedTarget(format), 0, 1);
    ASSERT_TRUE(quantized.ok()) << quantized.status();
    LlamaWeights dequantized = *quantized;
    std::vector<HostTensor*> targets = {&dequantized.lm_head};
    for (LayerWeights& l : dequantized.layers) {
      for (HostTensor* t :
           {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) {
        targets.push_back(t);
      }
    }
    for (HostTensor* t : targets) {
      auto values = std::make_shared<std::vector<float>>(t->numel());
      for (int64_t i = 0; i < t->rows; ++i) {
        for (int64_t j = 0; j < t->cols; ++j) (*values)[i * t->cols + j] = t->At(i, j);
      }
      *t = HostTensor{values->data(), DType::kF32, t->rows, t->cols, values};
    }
    CpuBackend backend(2);
    LlamaModelOptions options;
    options.kv_cache_bytes = size_t(4) << 20;
    auto q8_model = LlamaModel::Create(*quantized, &backend, nullptr, options);
    auto f32_model = LlamaModel::Create(dequantized, &backend, nullptr, options);
    ASSERT_TRUE(q8_model.ok() && f32_model.ok()) << q8_model.status();
    SequenceInput input;
    input.seq_id = 1;
    input.tokens = {1, 40, 300, 7, 1999, 12, 12, 5, 600};
    input.logit_indices = {0, 3, 8};
    std::vector<float> q8_logits, f32_logits;
    ASSERT_TRUE(ForwardToHost(**q8_model, {input}, &q8_logits).ok());
    ASSERT_TRUE(ForwardToHost(**f32_model, {input}, &f32_logits).ok());
    ASSERT_EQ(q8_logits.size(), f32_logits.size());
    const size_t vocab = q8_logits.size() / input.logit_indices.size();
    for (size_t row = 0; row < input.logit_indices.size(); ++row) {
      const float* q8 = q8_logits.data() + row * vocab;
      const float* f32 = f32_logits.data() + row * vocab;
      float largest = 0, worst = 0;
      for (size_t v = 0; v < vocab; ++v) {
        largest = std::max(largest, std::fabs(f32[v]));
        worst = std::max(worst, std::fabs(q8[v] - f32[v]));
      }
      EXPECT_LE(worst, 0.02f * largest) << DTypeName(format) << " row " << row;
      EXPECT_EQ(std::max_element(q8, q8 + vocab) - q8, std::max_element(f32, f32 + vocab) - f32)
          << "row " << row;
      std::printf("%s row %zu: max |q - f32| %.4f, max |logit| %.3f\n", DTypeName(format), row,
                  worst, largest);
    }
  }
}

// What greedy speculative decoding relies on, at q8_0 and q4_0: verifying K+1 positions
// in one forward gives bitwise the logits of decoding them one by one.
TEST(QuantizeModelTest, VerifyForwardEqualsTokenByTokenDecode) {
  for (DType format : kFormats) {
    auto quantized = LoadLlamaWeights(QuantizedTarget(format), 0, 1);
    ASSERT_TRUE(quantized.ok()) << quantized.status();
    CpuBackend backend(2);
    LlamaModelOptions options;
    options.kv_cache_bytes = size_t(4) << 20;
    auto model = LlamaModel::Create(*quantized, &backend, nullptr, options);
    ASSERT_TRUE(model.ok()) << model.status();
    const std::vector<int32_t> prompt = {1, 71, 8, 930, 44, 17}, drafted = {5, 300, 12, 1200, 9};
    auto seq = [](uint64_t id, int start, std::vector<int32_t> tokens, std::vector<int32_t> rows) {
      SequenceInput input;
      input.seq_id = id;
      input.start_position = start;
      input.tokens = std::move(tokens);
      input.logit_indices = std::move(rows);
      return input;
    };
    std::vector<float> verify, step, decoded;
    ASSERT_TRUE(ForwardToHost(**model, {seq(1, 0, prompt, {}), seq(2, 0, prompt, {})}, &step).ok());
    ASSERT_TRUE(ForwardToHost(**model, {seq(1, 6, drafted, {0, 1, 2, 3, 4})}, &verify).ok());
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(ForwardToHost(**model, {seq(2, 6 + i, {drafted[i]}, {0})}, &step).ok());
      decoded.insert(decoded.end(), step.begin(), step.end());
    }
    ASSERT_EQ(verify.size(), decoded.size());
    EXPECT_EQ(0, std::memcmp(verify.data(), decoded.data(), verify.size() * sizeof(float)))
        << DTypeName(format);
  }
}

// Copies the quantized target with its checkpoint's tensors passed through `edit`.
std::string EditedCopy(const std::string& name,
                       const std::function<void(std::vector<SafetensorsTensorData>*)>& edit,
                       DType format = DType::kQ8_0) {
  const std::string dir = TempDir(name);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(QuantizedTarget(format) + "/config.json", dir + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto file = SafetensorsFile::Open(QuantizedTarget(format) + "/model.safetensors");
  EXPECT_TRUE(file.ok());
  std::vector<SafetensorsTensorData> tensors;
  for (const std::string& tensor : (*file)->TensorNames()) {
    auto view = (*file)->Find(tensor);
    tensors.push_back({tensor, view->dtype, view->shape,
                       std::string(static_cast<const char*>(view->data), view->size_bytes)});
  }
  edit(&tensors);
  EXPECT_TRUE(WriteBinaryFile(dir + "/model.safetensors", SerializeSafetensors(tensors)).ok());
  return dir;
}

SafetensorsTensorData* Named(std::vector<SafetensorsTensorData>* tensors, const std::string& name) {
  for (auto& t : *tensors) {
    if (t.name == name) return &t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return &tensors->front();
}

const char kScale[] = "model.layers.1.mlp.up_proj.weight_scale";

TEST(QuantizeModelTest, BadQuantizedFilesFailAtLoadWithOneClearMessage) {
  struct Case {
    std::string name;
    std::function<void(std::vector<SafetensorsTensorData>*)> edit;
    std::string message;
    DType format = DType::kQ8_0;
  };
  const std::vector<Case> cases = {
      {"missing_scales",
       [](auto* t) {
         t->erase(std::find_if(t->begin(), t->end(), [](auto& x) { return x.name == kScale; }));
       },
       "are missing"},
      {"block_size_16",  // 256 columns in blocks of 16: 16 scales per row, not 8.
       [](auto* t) {
         SafetensorsTensorData* s = Named(t, kScale);
         s->shape[1] *= 2;
         s->bytes += s->bytes;
       },
       "one scale per block of 32 values of a row"},
      {"f32_scales",
       [](auto* t) {
         SafetensorsTensorData* s = Named(t, kScale);
         s->dtype = SafetensorsDType::kF32;
         s->shape[1] /= 2;
       },
       "expected F16"},
      {"q4_missing_scales",
       [](auto* t) {
         t->erase(std::find_if(t->begin(), t->end(), [](auto& x) { return x.name == kScale; }));
       },
       "is U8 (q4_0 quants) but its scales", DType::kQ4_0},
      {"q4_unpacked",  // One byte per value: [rows, cols] instead of [rows, cols / 2].
       [](auto* t) {
         SafetensorsTensorData* q = Named(t, "model.layers.1.mlp.up_proj.weight");
         q->shape[1] *= 2;
         q->bytes += q->bytes;
       },
       "(q4_0 packing of", DType::kQ4_0},
  };
  for (const Case& c : cases) {
    auto weights = LoadLlamaWeights(EditedCopy(c.name, c.edit, c.format), 0, 1);
    ASSERT_FALSE(weights.ok()) << c.name;
    EXPECT_EQ(weights.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(weights.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(weights.status().message(), HasSubstr("up_proj.weight")) << c.name;
  }
  // Scales truncated in the file: the header promises more bytes than the file holds.
  for (DType format : kFormats) {
    const std::string dir = EditedCopy(
        absl::StrCat("truncated_", DTypeName(format)), [](auto*) {}, format);
    const auto size = std::filesystem::file_size(dir + "/model.safetensors");
    std::filesystem::resize_file(dir + "/model.safetensors", size - 100);
    auto truncated = LoadLlamaWeights(dir, 0, 1);
    ASSERT_FALSE(truncated.ok()) << DTypeName(format);
    EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument);
  }
  // q8_0 row-parallel slices must cut on blocks: down_proj has 688 columns, 344 per rank.
  auto tp2 = LoadLlamaWeights(QuantizedTarget(), 0, 2);
  ASSERT_FALSE(tp2.ok());
  EXPECT_THAT(tp2.status().message(), HasSubstr("does not cut q8_0 rows on blocks of 32"));
  auto q4_tp2 = LoadLlamaWeights(QuantizedTarget(DType::kQ4_0), 0, 2);
  ASSERT_FALSE(q4_tp2.ok());
  EXPECT_THAT(q4_tp2.status().message(), HasSubstr("does not cut q4_0 rows on blocks of 32"));
  // A quantized model is not quantized again; only block formats are written.
  for (DType format : kFormats) {
    auto again = QuantizeModelDir(QuantizedTarget(format), TempDir("again"));
    EXPECT_EQ(again.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(QuantizeModelDir("models/target", TempDir("bf16"), DType::kBF16).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem
