// Synthetic benchmark weights: spec parsing, real shapes per tensor-parallel rank,
// determinism, and that the model runs on them (CPU backend, tiny configuration).
#include "model/synthetic_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "model/float16.h"
#include "model/llama.h"
#include "model/output_consumers.h"

namespace tandem {
namespace {

TEST(SyntheticWeightsTest, ParsesKnownModels) {
  auto seven = ParseSyntheticModel("llama-2-7b");
  ASSERT_TRUE(seven.ok()) << seven.status();
  EXPECT_EQ(seven->tp_size, 1);
  EXPECT_EQ(seven->config.head_dim, 128);
  // Llama-2-7B has 6.74 billion parameters.
  EXPECT_NEAR(double(seven->config.NumParameters()), 6.738e9, 0.01e9);
  EXPECT_NEAR(double(SyntheticWeightBytes(*seven)), 2 * 6.738e9, 0.02e9);

  auto shard = ParseSyntheticModel("llama-2-70b-shard:0/4");
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->tp_rank, 0);
  EXPECT_EQ(shard->tp_size, 4);
  EXPECT_EQ(shard->config.num_layers, 80);
  EXPECT_EQ(shard->config.hidden_size, 8192);
  EXPECT_EQ(shard->config.num_kv_heads, 8);
  // 68.98 billion parameters in all; a quarter of the sharded ones plus the replicated
  // embedding is ~17.5 billion values, ~35 GB in bf16.
  EXPECT_NEAR(double(shard->config.NumParameters()), 68.98e9, 0.05e9);
  EXPECT_NEAR(double(SyntheticWeightBytes(*shard)), 34.8e9, 0.3e9);
  EXPECT_TRUE(ParseSyntheticModel("llama-2-70b:3/8").ok());
}

TEST(SyntheticWeightsTest, RejectsBadSpecs) {
  for (const char* spec : {"gpt-2", "llama-2-70b:4/4", "llama-2-70b:0/3", "llama-2-70b:a/4",
                           "llama-2-70b:0", "llama-2-7b:-1/2", "tiny:0/0"}) {
    auto model = ParseSyntheticModel(spec);
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(model.status().message().find(spec), std::string::npos) << model.status();
  }
}

TEST(SyntheticWeightsTest, ShardShapesAndDeterminism) {
  auto model = ParseSyntheticModel("tiny:1/2");
  ASSERT_TRUE(model.ok());
  auto a = MakeSyntheticWeights(*model, 7);
  auto b = MakeSyntheticWeights(*model, 7);
  ASSERT_TRUE(a.ok() && b.ok());
  const LlamaConfig& c = model->config;
  EXPECT_EQ(a->tp_rank, 1);
  EXPECT_EQ(a->vocab_begin, c.vocab_size / 2);
  EXPECT_EQ(a->lm_head.rows, c.vocab_size / 2);
  EXPECT_EQ(a->embed_tokens.rows, c.vocab_size);
  ASSERT_EQ(int(a->layers.size()), c.num_layers);
  const LayerWeights& l = a->layers[0];
  EXPECT_EQ(l.q_proj.rows, c.num_heads / 2 * c.head_dim);
  EXPECT_EQ(l.k_proj.rows, c.num_kv_heads / 2 * c.head_dim);
  EXPECT_EQ(l.o_proj.cols, c.num_heads / 2 * c.head_dim);
  EXPECT_EQ(l.gate_proj.rows, c.intermediate_size / 2);
  EXPECT_EQ(l.down_proj.cols, c.intermediate_size / 2);
  EXPECT_EQ(l.q_proj.dtype, DType::kBF16);
  // Same seed, same values; norms are 1; matrices stay within their bound.
  EXPECT_EQ(std::memcmp(a->layers[1].gate_proj.data, b->layers[1].gate_proj.data,
                        size_t(l.gate_proj.numel()) * 2),
            0);
  EXPECT_EQ(l.input_norm.At(0, 5), 1.0f);
  const float bound = std::sqrt(3.0f / float(c.hidden_size)) * 1.01f;
  float largest = 0;
  for (int64_t j = 0; j < l.q_proj.cols; ++j)
    largest = std::max(largest, std::fabs(l.q_proj.At(3, j)));
  EXPECT_LE(largest, bound);
  EXPECT_GT(largest, 0.0f);
  auto other = MakeSyntheticWeights(*model, 8);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(std::memcmp(a->lm_head.data, other->lm_head.data, 64), 0);
}

TEST(SyntheticWeightsTest, TensorListMatchesTheWeightsOneByOne) {
  auto model = ParseSyntheticModel("tiny:1/2");
  ASSERT_TRUE(model.ok());
  auto weights = MakeSyntheticWeights(*model, 3);
  ASSERT_TRUE(weights.ok());
  const std::vector<SyntheticTensor> tensors = SyntheticTensors(*model);
  const LlamaConfig& c = model->config;
  ASSERT_EQ(tensors.size(), size_t(3 + 9 * c.num_layers));
  // The tensors in the documented order, each with the values of its weights field.
  const LayerWeights& last = weights->layers.back();
  const std::pair<const char*, const HostTensor*> expected[] = {
      {"model.embed_tokens.weight", &weights->embed_tokens},
      {"model.norm.weight", &weights->final_norm},
      {"lm_head.weight", &weights->lm_head},
      {"model.layers.1.input_layernorm.weight", &last.input_norm},
      {"model.layers.1.post_attention_layernorm.weight", &last.post_attn_norm},
      {"model.layers.1.self_attn.q_proj.weight", &last.q_proj},
      {"model.layers.1.self_attn.k_proj.weight", &last.k_proj},
      {"model.layers.1.self_attn.v_proj.weight", &last.v_proj},
      {"model.layers.1.self_attn.o_proj.weight", &last.o_proj},
      {"model.layers.1.mlp.gate_proj.weight", &last.gate_proj},
      {"model.layers.1.mlp.up_proj.weight", &last.up_proj},
      {"model.layers.1.mlp.down_proj.weight", &last.down_proj},
  };
  for (int i = 0; i < 12; ++i) {
    const SyntheticTensor& t = tensors[i < 3 ? i : tensors.size() - 12 + i];
    const HostTensor& field = *expected[i].second;
    EXPECT_EQ(t.name, expected[i].first);
    EXPECT_EQ(t.rows, field.rows) << t.name;
    EXPECT_EQ(t.cols, field.cols) << t.name;
    auto made = MakeSyntheticTensor(t, 3);
    ASSERT_TRUE(made.ok()) << made.status();
    EXPECT_EQ(made->dtype, DType::kBF16);
    EXPECT_EQ(std::memcmp(made->data, field.data, size_t(field.numel()) * 2), 0) << t.name;
  }
  using Kind = SyntheticTensor::Kind;
  EXPECT_EQ(tensors[0].kind, Kind::kEmbedding);
  EXPECT_EQ(tensors[1].kind, Kind::kNorm);
  EXPECT_EQ(tensors[2].kind, Kind::kMatrix);
  // Same shape and kind, same values: the norms share one stream, k and v another.
  EXPECT_EQ(tensors[3].values, tensors[1].values);
  EXPECT_EQ(tensors[6].values, tensors[7].values);
  EXPECT_NE(tensors[5].values, tensors[9].values);
}

TEST(SyntheticWeightsTest, TheModelRunsOnThem) {
  auto model = ParseSyntheticModel("tiny");
  ASSERT_TRUE(model.ok());
  auto weights = MakeSyntheticWeights(*model, 1);
  ASSERT_TRUE(weights.ok());
  CpuBackend backend(1);
  auto llama = LlamaModel::Create(*weights, &backend, nullptr, LlamaModelOptions());
  ASSERT_TRUE(llama.ok()) << llama.status();
  SequenceInput in;
  in.seq_id = 1;
  in.tokens = {1, 5, 9, 200};
  in.logit_indices = {3};
  std::vector<float> logits;
  ASSERT_TRUE(ForwardToHost(**llama, {in}, &logits).ok());
  ASSERT_EQ(logits.size(), size_t(model->config.vocab_size));
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace tandem
