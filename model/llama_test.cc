// LlamaModel on the CPU backend with random in-memory weights: agreement with a
// double-precision reference, bitwise incremental/batch/rollback invariance, scratch
// reuse, and Create's checks of weights and options. KV cache bookkeeping, KeepPath and
// input validation: llama_cache_test.cc.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "comm/local_communicator.h"
#include "gtest/gtest.h"
#include "model/llama_test_fixture.h"
#include "model/output_consumers.h"

namespace tandem {
namespace {

// f32 compute against the double reference: per element |got - want| must be within
// kAbsTol + kRelTol * |want|. Logits here are O(1..10); float32 accumulation over
// reductions of length <= 96 in 2 layers gives errors around 1e-6..1e-5, so 1e-4 leaves
// an order of magnitude of slack while still catching any real math error (a wrong
// RoPE pair, mask or norm shifts logits by 1e-2 or more).
constexpr double kAbsTol = 1e-4;
constexpr double kRelTol = 1e-4;

TEST_F(LlamaTest, MatchesDoublePrecisionReference) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied embeddings" : "untied head");
    config_.tie_word_embeddings = tied;
    weights_ = RandomLlamaWeights(config_, tied ? 11 : 12);
    std::unique_ptr<LlamaModel> model = MakeModel(DefaultOptions());
    const std::vector<int32_t> tokens = RandomTokens(37, config_.vocab_size, 3);
    const std::vector<float> got = Run(model.get(), {Seq(1, 0, tokens, Range(0, 37))});
    const std::vector<double> want = ReferenceLogits(weights_, tokens);
    ASSERT_EQ(got.size(), want.size());
    double max_err = 0, max_abs = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      max_err = std::max(max_err, std::abs(got[i] - want[i]));
      max_abs = std::max(max_abs, std::abs(want[i]));
      ASSERT_LE(std::abs(got[i] - want[i]), kAbsTol + kRelTol * std::abs(want[i]))
          << "element " << i << " (position " << i / config_.vocab_size << ")";
    }
    // The test data must exercise real magnitudes, else the tolerance means little.
    EXPECT_GT(max_abs, 1.0);
    RecordProperty(tied ? "max_err_tied" : "max_err_untied", std::to_string(max_err));
  }
}

TEST_F(LlamaTest, IncrementalDecodeIsBitwiseFullForward) {
  const std::vector<int32_t> tokens = RandomTokens(30, config_.vocab_size, 5);
  const std::vector<float> full = Run(model_.get(), {Seq(1, 0, tokens, Range(0, 30))});
  const std::vector<float> prefill = Run(model_.get(), {Seq(2, 0, Slice(tokens, 0, 10), {9})});
  ExpectBitwiseEqual(prefill, Row(full, 9), "prefill last row");
  for (int t = 10; t < 30; ++t) {
    const std::vector<float> step = Run(model_.get(), {Seq(2, t, {tokens[t]}, {0})});
    ExpectBitwiseEqual(step, Row(full, t), "decode step " + std::to_string(t));
  }
  EXPECT_EQ(CachedLength(2), 30);
}

TEST_F(LlamaTest, RollbackThenRefeedIsBitwiseNeverFed) {
  const std::vector<int32_t> prompt = RandomTokens(13, config_.vocab_size, 8);
  const std::vector<int32_t> rejected = RandomTokens(6, config_.vocab_size, 9);
  const std::vector<int32_t> accepted = RandomTokens(4, config_.vocab_size, 10);

  // Never fed the rejected tokens.
  std::vector<int32_t> clean = prompt;
  clean.insert(clean.end(), accepted.begin(), accepted.end());
  const std::vector<float> want = Run(model_.get(), {Seq(1, 0, clean, Range(13, 17))});

  // Rollback through start_position.
  Run(model_.get(), {Seq(2, 0, prompt, {})});
  Run(model_.get(), {Seq(2, 13, rejected, Range(0, 6))});
  EXPECT_EQ(CachedLength(2), 19);
  ExpectBitwiseEqual(Run(model_.get(), {Seq(2, 13, accepted, Range(0, 4))}), want,
                     "refeed via start_position");
  EXPECT_EQ(CachedLength(2), 17);

  // Rollback through an explicit Truncate.
  Run(model_.get(), {Seq(3, 0, prompt, {})});
  Run(model_.get(), {Seq(3, 13, rejected, {})});
  ASSERT_TRUE(model_->Truncate(3, 13).ok());
  EXPECT_EQ(CachedLength(3), 13);
  ExpectBitwiseEqual(Run(model_.get(), {Seq(3, 13, accepted, Range(0, 4))}), want,
                     "refeed after Truncate");
}

TEST_F(LlamaTest, BatchInvariance) {
  const std::vector<int32_t> tokens = RandomTokens(21, config_.vocab_size, 20);
  // Reference: the last 5 positions (a K+1 = 5 verify chunk) fed one at a time, alone.
  Run(model_.get(), {Seq(1, 0, Slice(tokens, 0, 16), {})});
  std::vector<float> one_at_a_time;
  for (int t = 16; t < 21; ++t) {
    const std::vector<float> row = Run(model_.get(), {Seq(1, t, {tokens[t]}, {0})});
    one_at_a_time.insert(one_at_a_time.end(), row.begin(), row.end());
  }
  // Alone, as one chunk.
  Run(model_.get(), {Seq(2, 0, Slice(tokens, 0, 16), {})});
  ExpectBitwiseEqual(Run(model_.get(), {Seq(2, 16, Slice(tokens, 16, 21), Range(0, 5))}),
                     one_at_a_time, "K+1 chunk alone");

  // Inside batches of mixed lengths, at different places in the batch.
  const std::vector<int32_t> other = RandomTokens(40, config_.vocab_size, 21);
  Run(model_.get(), {Seq(10, 0, Slice(other, 0, 9), {}), Seq(11, 0, Slice(other, 0, 30), {})});
  Run(model_.get(), {Seq(3, 0, Slice(tokens, 0, 16), {}), Seq(4, 0, Slice(tokens, 0, 16), {})});
  const std::vector<float> mixed_a =
      Run(model_.get(),
          {Seq(10, 9, {other[9]}, {0}), Seq(3, 16, Slice(tokens, 16, 21), Range(0, 5)),
           Seq(11, 30, Slice(other, 30, 37), {0, 3, 6}), Seq(12, 0, Slice(other, 0, 33), {32})});
  const int v = config_.vocab_size;
  ExpectBitwiseEqual(std::vector<float>(mixed_a.begin() + v, mixed_a.begin() + 6 * v),
                     one_at_a_time, "chunk in a mixed batch");
  const std::vector<float> mixed_b = Run(
      model_.get(),
      {Seq(13, 0, Slice(other, 0, 3), {0, 1, 2}), Seq(4, 16, Slice(tokens, 16, 21), Range(0, 5))});
  ExpectBitwiseEqual(std::vector<float>(mixed_b.begin() + 3 * v, mixed_b.end()), one_at_a_time,
                     "chunk last in a batch");
}

TEST_F(LlamaTest, NoLogitsRequestedAndScratchReuse) {
  const std::vector<int32_t> tokens = RandomTokens(20, config_.vocab_size, 70);
  std::vector<float> logits = {1.0f, 2.0f};
  ASSERT_TRUE(ForwardToHost(*model_, {Seq(1, 0, tokens, {})}, &logits).ok());
  EXPECT_TRUE(logits.empty());
  // A larger batch after a small one grows the scratch; a small one after reuses it.
  const std::vector<float> small1 = Run(model_.get(), {Seq(2, 0, Slice(tokens, 0, 3), {2})});
  Run(model_.get(), {Seq(3, 0, RandomTokens(120, config_.vocab_size, 71), Range(0, 120))});
  const std::vector<float> small2 = Run(model_.get(), {Seq(4, 0, Slice(tokens, 0, 3), {2})});
  ExpectBitwiseEqual(small1, small2, "before and after scratch growth");
}

TEST_F(LlamaTest, CreateRejectsInconsistentWeightsAndOptions) {
  LlamaWeights bad = weights_;
  bad.layers[1].k_proj.rows -= 1;
  auto model = LlamaModel::Create(bad, backend_.get(), nullptr, DefaultOptions());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("layers.1.k_proj"), std::string::npos) << model.status();

  bad = weights_;
  bad.layers.pop_back();
  EXPECT_EQ(LlamaModel::Create(bad, backend_.get(), nullptr, DefaultOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);

  LlamaModelOptions options = DefaultOptions();
  options.kv_cache_bytes = 10;
  EXPECT_EQ(LlamaModel::Create(weights_, backend_.get(), nullptr, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = DefaultOptions();
  options.max_batch_tokens = 0;
  EXPECT_EQ(LlamaModel::Create(weights_, backend_.get(), nullptr, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LlamaModel::Create(weights_, nullptr, nullptr, DefaultOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Unsharded weights with a 2-rank communicator, and sharded weights without one.
  auto group = LocalGroup::Create(2);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(LlamaModel::Create(weights_, backend_.get(), (*group)[0].get(), DefaultOptions())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  bad = weights_;
  bad.tp_size = 2;
  EXPECT_EQ(LlamaModel::Create(bad, backend_.get(), nullptr, DefaultOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A single-rank communicator is accepted for unsharded weights.
  std::unique_ptr<Communicator> single = CreateSingleRankCommunicator();
  EXPECT_TRUE(LlamaModel::Create(weights_, backend_.get(), single.get(), DefaultOptions()).ok());
}

}  // namespace
}  // namespace tandem
