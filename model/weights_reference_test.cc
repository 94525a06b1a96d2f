// Llama weights (model/weights.h) loaded from the reference checkpoints with awkward
// shapes (tests/reference/checkpoints: f16 with head_dim 20 and one KV head, bf16
// Llama 3 with tied embeddings, sharded f32, f32 for tensor parallelism) and the
// bundled models: shapes follow config.json, rank slices concatenate to the full
// tensor, and KV heads are replicated when ranks outnumber them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/config.h"
#include "model/weights.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

// --- Reference checkpoints with awkward shapes and the bundled models ----------

const char* const kModelDirs[] = {
    "tests/reference/checkpoints/tiny_f16_hd20_kv1",
    "tests/reference/checkpoints/tiny_bf16_llama3_tied",
    "tests/reference/checkpoints/tiny_f32_sharded",
    "tests/reference/checkpoints/tiny_f32_tp",
    "models/target",
    "models/draft",
};

DType DTypeOf(const std::string& torch_dtype) {
  if (torch_dtype == "float16") return DType::kF16;
  if (torch_dtype == "bfloat16") return DType::kBF16;
  return DType::kF32;
}

// The loader's rule: KV heads either split or (tp a multiple of them) replicate.
bool DividesSplitDimensions(const LlamaConfig& config, int tp) {
  return config.num_heads % tp == 0 &&
         (config.num_kv_heads % tp == 0 || tp % config.num_kv_heads == 0) &&
         config.intermediate_size % tp == 0 && config.vocab_size % tp == 0;
}

void ExpectEqualElements(const HostTensor& a, const HostTensor& b, int64_t a_row0, int64_t a_col0,
                         const std::string& what) {
  for (int64_t i = 0; i < b.rows; ++i) {
    for (int64_t j = 0; j < b.cols; ++j) {
      const float expected = a.At(a_row0 + i, a_col0 + j);
      ASSERT_EQ(b.At(i, j), expected) << what << " (" << i << ", " << j << ")";
    }
  }
}

// Rank slices concatenated along rows (column-parallel) or columns (row-parallel)
// equal the unsplit tensor element for element.
void ExpectRankSlicesCoverTensor(const std::function<const HostTensor&(const LlamaWeights&)>& get,
                                 const LlamaWeights& full, const std::vector<LlamaWeights>& ranks,
                                 bool split_rows, const std::string& what) {
  const HostTensor& whole = get(full);
  int64_t offset = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const HostTensor& slice = get(ranks[r]);
    ASSERT_EQ(slice.dtype, whole.dtype) << what;
    if (split_rows) {
      ASSERT_EQ(slice.cols, whole.cols) << what;
      ExpectEqualElements(whole, slice, offset, 0, what + " rank " + std::to_string(r));
      offset += slice.rows;
    } else {
      ASSERT_EQ(slice.rows, whole.rows) << what;
      ExpectEqualElements(whole, slice, 0, offset, what + " rank " + std::to_string(r));
      offset += slice.cols;
    }
  }
  EXPECT_EQ(offset, split_rows ? whole.rows : whole.cols) << what;
}

TEST(WeightsTest, ReferenceCheckpointsLoadWithConfigShapes) {
  for (const char* dir : kModelDirs) {
    auto weights = LoadLlamaWeights(dir, 0, 1);
    ASSERT_TRUE(weights.ok()) << weights.status();
    const LlamaConfig& config = weights->config;
    const int64_t hidden = config.hidden_size;
    const DType dtype = DTypeOf(config.torch_dtype);
    const char* name = dir;
    EXPECT_EQ(weights->embed_tokens.dtype, dtype) << name;
    EXPECT_EQ(weights->embed_tokens.rows, config.vocab_size) << name;
    EXPECT_EQ(weights->embed_tokens.cols, hidden) << name;
    EXPECT_EQ(weights->lm_head.rows, config.vocab_size) << name;
    EXPECT_EQ(weights->final_norm.cols, hidden) << name;
    if (config.tie_word_embeddings) {
      EXPECT_EQ(weights->lm_head.data, weights->embed_tokens.data) << name;
    } else {
      EXPECT_NE(weights->lm_head.data, weights->embed_tokens.data) << name;
    }
    ASSERT_EQ(weights->layers.size(), static_cast<size_t>(config.num_layers)) << name;
    for (const LayerWeights& layer : weights->layers) {
      EXPECT_EQ(layer.q_proj.rows, config.num_heads * config.head_dim) << name;
      EXPECT_EQ(layer.k_proj.rows, config.num_kv_heads * config.head_dim) << name;
      EXPECT_EQ(layer.o_proj.cols, config.num_heads * config.head_dim) << name;
      EXPECT_EQ(layer.down_proj.cols, config.intermediate_size) << name;
      EXPECT_EQ(layer.down_proj.dtype, dtype) << name;
      for (int64_t j = 0; j < hidden; ++j) {
        ASSERT_TRUE(std::isfinite(layer.input_norm.At(0, j))) << name;
      }
    }
  }
}

TEST(WeightsTest, ReferenceRankSlicesConcatenateToTheFullTensor) {
  int largest_tp_checked = 0;
  for (const char* dir : kModelDirs) {
    auto full = LoadLlamaWeights(dir, 0, 1);
    ASSERT_TRUE(full.ok()) << full.status();
    for (int tp : {2, 4}) {
      if (!DividesSplitDimensions(full->config, tp)) {
        const absl::Status status = LoadLlamaWeights(dir, 0, tp).status();
        EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << dir;
        EXPECT_THAT(status.message(),
                    HasSubstr(absl::StrCat("is not divisible by the tensor parallel size ", tp)));
        continue;
      }
      largest_tp_checked = std::max(largest_tp_checked, tp);
      std::vector<LlamaWeights> ranks;
      for (int r = 0; r < tp; ++r) {
        auto weights = LoadLlamaWeights(dir, r, tp);
        ASSERT_TRUE(weights.ok()) << weights.status();
        ranks.push_back(*std::move(weights));
      }
      const std::string what = absl::StrCat(dir, " tp ", tp);
      ExpectRankSlicesCoverTensor(
          [](const LlamaWeights& w) -> const HostTensor& { return w.lm_head; }, *full, ranks, true,
          what + " lm_head");
      for (int l = 0; l < full->config.num_layers; ++l) {
        const std::string lw = what + " layer " + std::to_string(l);
        using Getter = const HostTensor& (*)(const LayerWeights&);
        const std::pair<Getter, bool> splits[] = {
            {[](const LayerWeights& w) -> const HostTensor& { return w.q_proj; }, true},
            {[](const LayerWeights& w) -> const HostTensor& { return w.k_proj; }, true},
            {[](const LayerWeights& w) -> const HostTensor& { return w.v_proj; }, true},
            {[](const LayerWeights& w) -> const HostTensor& { return w.gate_proj; }, true},
            {[](const LayerWeights& w) -> const HostTensor& { return w.up_proj; }, true},
            {[](const LayerWeights& w) -> const HostTensor& { return w.o_proj; }, false},
            {[](const LayerWeights& w) -> const HostTensor& { return w.down_proj; }, false},
        };
        const bool kv_replicated = full->config.num_kv_heads % tp != 0;
        for (size_t s = 0; s < sizeof(splits) / sizeof(splits[0]); ++s) {
          // Replicated KV heads do not partition k/v (checked by
          // KvHeadsAreReplicatedWhenRanksOutnumberThem).
          if (kv_replicated && (s == 1 || s == 2)) continue;
          const Getter getter = splits[s].first;
          ExpectRankSlicesCoverTensor(
              [l, getter](const LlamaWeights& w) -> const HostTensor& {
                return getter(w.layers[l]);
              },
              *full, ranks, splits[s].second, lw + " tensor " + std::to_string(s));
        }
        // Replicated norms are identical on every rank.
        for (const LlamaWeights& rank : ranks) {
          ExpectEqualElements(full->layers[l].input_norm, rank.layers[l].input_norm, 0, 0,
                              lw + " input_norm");
        }
      }
    }
  }
  EXPECT_EQ(largest_tp_checked, 4);  // tiny_f32_tp is built to split four ways.
}

// More ranks than KV heads: every rank holds the one KV head its query heads read.
TEST(WeightsTest, KvHeadsAreReplicatedWhenRanksOutnumberThem) {
  struct Case {
    std::string dir;
    int tp;
  };
  for (const Case& c : {Case{"tests/reference/checkpoints/tiny_f16_hd20_kv1", 2},
                        Case{"tests/reference/checkpoints/tiny_bf16_llama3_tied", 4}}) {
    SCOPED_TRACE(c.dir);
    auto full = LoadLlamaWeights(c.dir, 0, 1);
    ASSERT_TRUE(full.ok()) << full.status();
    const LlamaConfig& config = full->config;
    const int hd = config.head_dim;
    const int heads_per_kv = config.num_heads / config.num_kv_heads;
    for (int r = 0; r < c.tp; ++r) {
      auto shard = LoadLlamaWeights(c.dir, r, c.tp);
      ASSERT_TRUE(shard.ok()) << shard.status();
      const HostTensor& k = shard->layers[0].k_proj;
      const HostTensor& v = shard->layers[0].v_proj;
      ASSERT_EQ(k.rows, hd);
      ASSERT_EQ(v.rows, hd);
      // Rank r's first query head is r * heads / tp; it reads KV head that / heads_per_kv.
      const int kv_head = (r * config.num_heads / c.tp) / heads_per_kv;
      EXPECT_EQ(FirstKvHead(config, r, c.tp), kv_head);
      for (int i = 0; i < hd; ++i) {
        for (int j = 0; j < k.cols; ++j) {
          ASSERT_EQ(k.At(i, j), full->layers[0].k_proj.At(kv_head * hd + i, j));
          ASSERT_EQ(v.At(i, j), full->layers[0].v_proj.At(kv_head * hd + i, j));
        }
      }
    }
    EXPECT_EQ(LocalKvHeads(config, c.tp), 1);
  }
}

}  // namespace
}  // namespace tandem
