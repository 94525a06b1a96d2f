// LlamaModel's KV cache bookkeeping on the CPU backend with random in-memory weights:
// tree verification and KeepPath compaction, invalid input rejected without changing
// any cache (Forward with the host-logits, acceptance and draft-sampling consumers),
// positions past max_position_embeddings, KV budget exhaustion, Truncate and Release.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "model/llama_test_fixture.h"
#include "model/output_consumers.h"

namespace tandem {
namespace {

TEST_F(LlamaTest, TreeNodesMatchTheirChainsAndKeepPathCompacts) {
  const std::vector<int32_t> context = RandomTokens(10, config_.vocab_size, 30);
  const std::vector<int32_t> tree_tokens = RandomTokens(7, config_.vocab_size, 31);
  // Tree: 0 is the root; 1 and 2 are children of 0; 3 and 4 of 1; 5 of 2; 6 of 5.
  const std::vector<int32_t> parents = {-1, 0, 0, 1, 1, 2, 5};
  Run(model_.get(), {Seq(1, 0, context, {})});
  const std::vector<float> tree =
      Run(model_.get(), {Seq(1, 10, tree_tokens, Range(0, 7), parents)});
  EXPECT_EQ(CachedLength(1), 17);

  uint64_t next_id = 100;
  for (int node = 0; node < 7; ++node) {
    std::vector<int32_t> chain;
    for (int n = node; n >= 0; n = parents[n]) chain.insert(chain.begin(), tree_tokens[n]);
    const int len = static_cast<int>(chain.size());
    Run(model_.get(), {Seq(next_id, 0, context, {})});
    const std::vector<float> alone = Run(model_.get(), {Seq(next_id, 10, chain, {len - 1})});
    ExpectBitwiseEqual(Row(tree, node), alone, "tree node " + std::to_string(node));
    ++next_id;
  }

  // Path checks: not a path, does not start at a root, wrong start.
  EXPECT_EQ(model_->KeepPath(1, 10, {0, 2, 3}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->KeepPath(1, 10, {1, 3}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->KeepPath(1, 10, {0, 7}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->KeepPath(1, 9, {0}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(model_->KeepPath(99, 10, {0}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(CachedLength(1), 17);

  // Accept 0 -> 2 -> 5 -> 6, then decode one more token: equal to the chain alone.
  ASSERT_TRUE(model_->KeepPath(1, 10, {0, 2, 5, 6}).ok());
  EXPECT_EQ(CachedLength(1), 14);
  const int32_t next = 42;
  const std::vector<float> after = Run(model_.get(), {Seq(1, 14, {next}, {0})});
  std::vector<int32_t> accepted_chain = context;
  for (int n : {0, 2, 5, 6}) accepted_chain.push_back(tree_tokens[n]);
  accepted_chain.push_back(next);
  ExpectBitwiseEqual(after, Run(model_.get(), {Seq(500, 0, accepted_chain, {14})}),
                     "decode after KeepPath");
  // A KeepPath consumes the record of the last forward.
  EXPECT_EQ(model_->KeepPath(1, 14, {0}).code(), absl::StatusCode::kOk);
  EXPECT_EQ(model_->KeepPath(1, 14, {0}).code(), absl::StatusCode::kFailedPrecondition);
}

// f16 and bf16 KV caches: half the bytes per block; incremental decode is bitwise the
// full forward, a tree verified then compacted by KeepPath continues bitwise as the
// accepted chain alone (the slot copies move 16-bit values), logits stay close to the
// float32 cache's; a q8_0 KV cache is refused.
TEST_F(LlamaTest, HalfKvCacheKeepsExactnessAndStaysClose) {
  const std::vector<int32_t> tokens = RandomTokens(24, config_.vocab_size, 40);
  const std::vector<float> f32_logits = Run(model_.get(), {Seq(1, 0, tokens, Range(0, 24))});
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    LlamaModelOptions options = DefaultOptions();
    options.kv_dtype = dtype;
    std::unique_ptr<LlamaModel> model = MakeModel(options);
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->kv_stats().bytes_per_block * 2,
              KvBytesPerBlock(config_.num_layers, options.block_size, config_.num_kv_heads,
                              config_.head_dim));
    const std::vector<float> full = Run(model.get(), {Seq(1, 0, tokens, Range(0, 24))});
    for (size_t i = 0; i < full.size(); ++i) {
      ASSERT_NEAR(full[i], f32_logits[i], 0.05 + 0.02 * std::abs(f32_logits[i])) << i;
    }
    Run(model.get(), {Seq(2, 0, Slice(tokens, 0, 12), {})});
    for (int t = 12; t < 16; ++t) {
      ExpectBitwiseEqual(Run(model.get(), {Seq(2, t, {tokens[t]}, {0})}), Row(full, t),
                         std::string(DTypeName(dtype)) + " decode step " + std::to_string(t));
    }
    // Tree 0 -> {1, 2}, 2 -> 3 after 16 tokens; keep 0 -> 2 -> 3; decode one more.
    const std::vector<int32_t> tree = {tokens[16], 77, tokens[17], tokens[18]};
    Run(model.get(), {Seq(2, 16, tree, Range(0, 4), {-1, 0, 0, 2})});
    ASSERT_TRUE(model->KeepPath(2, 16, {0, 2, 3}).ok());
    ExpectBitwiseEqual(Run(model.get(), {Seq(2, 19, {tokens[19]}, {0})}), Row(full, 19),
                       std::string(DTypeName(dtype)) + " decode after KeepPath");
  }
  LlamaModelOptions options = DefaultOptions();
  options.kv_dtype = DType::kQ8_0;
  EXPECT_EQ(LlamaModel::Create(weights_, backend_.get(), nullptr, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LlamaTest, KeepPathOfAChainAndEmptyPath) {
  const std::vector<int32_t> tokens = RandomTokens(12, config_.vocab_size, 40);
  Run(model_.get(), {Seq(1, 0, Slice(tokens, 0, 8), {})});
  Run(model_.get(), {Seq(1, 8, Slice(tokens, 8, 12), Range(0, 4))});
  EXPECT_EQ(model_->KeepPath(1, 8, {0, 2}).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(model_->KeepPath(1, 8, {0, 1}).ok());
  EXPECT_EQ(CachedLength(1), 10);
  Run(model_.get(), {Seq(1, 10, {5, 6}, {})});
  ASSERT_TRUE(model_->KeepPath(1, 10, {}).ok());
  EXPECT_EQ(CachedLength(1), 10);
}

TEST_F(LlamaTest, InvalidInputIsRejectedAndChangesNothing) {
  const std::vector<int32_t> tokens = RandomTokens(12, config_.vocab_size, 50);
  Run(model_.get(), {Seq(1, 0, Slice(tokens, 0, 10), {})});
  const KvCacheStats before = model_->kv_stats();
  const int v = config_.vocab_size;
  // Each bad batch also asks to roll sequence 1 back to 5 and create sequence 2.
  const auto with_valid = [&](SequenceInput bad) {
    return std::vector<SequenceInput>{Seq(1, 5, {1, 2}, {0}), Seq(2, 0, {3}, {0}), std::move(bad)};
  };
  const std::vector<std::pair<std::string, std::vector<SequenceInput>>> cases = {
      {"empty batch", {}},
      {"token too large", with_valid(Seq(3, 0, {1, v}, {}))},
      {"negative token", with_valid(Seq(3, 0, {-1}, {}))},
      {"no tokens", with_valid(Seq(3, 0, {}, {}))},
      {"start past cache", with_valid(Seq(3, 1, {1}, {}))},
      {"negative start", with_valid(Seq(3, -1, {1}, {}))},
      {"duplicate id", with_valid(Seq(1, 10, {1}, {}))},
      {"too many tokens", with_valid(Seq(3, 0, std::vector<int32_t>(126, 1), {}))},
      {"logit index out of range", with_valid(Seq(3, 0, {1, 2}, {2}))},
      {"logit indices not ascending", with_valid(Seq(3, 0, {1, 2}, {1, 0}))},
      {"parents size", with_valid(Seq(3, 0, {1, 2}, {}, {-1}))},
      {"parent not before child", with_valid(Seq(3, 0, {1, 2}, {}, {-1, 1}))},
      {"parent below -1", with_valid(Seq(3, 0, {1, 2}, {}, {-1, -2}))},
  };
  const auto expect_unchanged = [&](const std::string& name) {
    EXPECT_EQ(CachedLength(1), 10) << name;
    EXPECT_FALSE(model_->CachedLength(2).ok()) << name;
    EXPECT_FALSE(model_->CachedLength(3).ok()) << name;
    EXPECT_EQ(model_->kv_stats().used_blocks, before.used_blocks) << name;
  };
  std::vector<float> logits;
  std::vector<VerifyOutcome> outcomes;
  std::vector<DraftProposal> proposals;
  for (const auto& [name, batch] : cases) {
    absl::Status status = ForwardToHost(*model_, batch, &logits);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name << ": " << status;
    expect_unchanged(name);
    VerifyAcceptConsumer accept({}, &outcomes);
    status = model_->Forward(batch, accept);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name << ": " << status;
    expect_unchanged("accept: " + name);
    DraftSampleConsumer sample({}, &proposals);
    status = model_->Forward(batch, sample);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name << ": " << status;
    expect_unchanged("sample drafts: " + name);
  }
  HostLogitsConsumer no_logits(nullptr);
  EXPECT_EQ(model_->Forward({Seq(1, 10, {1}, {0})}, no_logits).code(),
            absl::StatusCode::kInvalidArgument);
  VerifyAcceptConsumer no_outcomes({}, nullptr);
  EXPECT_EQ(model_->Forward({Seq(1, 10, {1}, {0})}, no_outcomes).code(),
            absl::StatusCode::kInvalidArgument);
  // Acceptance: a K = 1 chain from row 1 of a valid batch with 2 logit rows.
  VerifyChain past_the_rows;
  past_the_rows.first_row = 1;
  past_the_rows.proposals.resize(1);
  const VerifyChain chains[] = {past_the_rows};
  VerifyAcceptConsumer accept_past(chains, &outcomes);
  const absl::Status past = model_->Forward(with_valid(Seq(3, 0, {1}, {})), accept_past);
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument) << past;
  expect_unchanged("chain past the logit rows");
  // Draft sampling: no output, a row past the 3 logit rows, a q_size of 0.
  DraftSampleConsumer no_proposals({}, nullptr);
  EXPECT_EQ(model_->Forward({Seq(1, 10, {1}, {0})}, no_proposals).code(),
            absl::StatusCode::kInvalidArgument);
  DraftRow past_the_logit_rows, no_q;
  past_the_logit_rows.row = 3;
  no_q.q_size = 0;
  for (const DraftRow& bad : {past_the_logit_rows, no_q}) {
    const DraftRow drafts[] = {DraftRow(), bad};
    DraftSampleConsumer sample(drafts, &proposals);
    const absl::Status status = model_->Forward(with_valid(Seq(3, 0, {1}, {0})), sample);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    expect_unchanged("draft row past the logit rows or q_size 0");
  }

  // Positions past max_position_embeddings (256): chain and tree depth.
  LlamaModelOptions options = DefaultOptions();
  options.max_batch_tokens = 300;
  std::unique_ptr<LlamaModel> big = MakeModel(options);
  Run(big.get(), {Seq(1, 0, std::vector<int32_t>(250, 1), {})});
  EXPECT_EQ(ForwardToHost(*big, {Seq(1, 250, std::vector<int32_t>(7, 1), {})}, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  // A tree of 7 nodes but depth 1 fits (positions 250, 251).
  EXPECT_TRUE(ForwardToHost(*big,
                            {Seq(1, 250, std::vector<int32_t>(7, 1), {6}, {-1, 0, 0, 0, 0, 0, 0})},
                            &logits)
                  .ok());
  EXPECT_EQ(ForwardToHost(*big, {Seq(2, 0, std::vector<int32_t>(257, 1), {})}, &logits).code(),
            absl::StatusCode::kInvalidArgument);

  // The cache of sequence 1 still holds exactly the original 10 tokens.
  ExpectBitwiseEqual(Run(model_.get(), {Seq(1, 10, Slice(tokens, 10, 12), {0, 1})}),
                     Run(model_.get(), {Seq(9, 0, tokens, {10, 11})}), "after rejected batches");
}

TEST_F(LlamaTest, KvBudgetExhaustionAndAccounting) {
  LlamaModelOptions options = DefaultOptions();
  const size_t per_block = KvBytesPerBlock(config_.num_layers, options.block_size,
                                           config_.num_kv_heads, config_.head_dim);
  EXPECT_EQ(per_block, size_t(2 * 2 * 4 * 4 * 8 * 4));
  options.kv_cache_bytes = 6 * per_block + per_block / 2;  // 6 blocks of 4 tokens.
  std::unique_ptr<LlamaModel> model = MakeModel(options);
  KvCacheStats stats = model->kv_stats();
  EXPECT_EQ(stats.total_blocks, 6);
  EXPECT_EQ(stats.bytes_per_block, per_block);
  EXPECT_EQ(stats.total_bytes, 6 * per_block);
  EXPECT_EQ(stats.block_size, 4);

  const std::vector<int32_t> tokens = RandomTokens(24, config_.vocab_size, 60);
  Run(model.get(), {Seq(1, 0, Slice(tokens, 0, 9), {}), Seq(2, 0, Slice(tokens, 0, 5), {})});
  EXPECT_EQ(model->kv_stats().used_blocks, 5);  // 3 + 2.
  EXPECT_EQ(model->kv_stats().num_sequences, 2);

  // Sequence 1 alone would fit (one more block), sequence 3 would not: nothing changes.
  std::vector<float> logits;
  absl::Status status = ForwardToHost(
      *model, {Seq(1, 9, Slice(tokens, 9, 13), {0}), Seq(3, 0, Slice(tokens, 0, 5), {0})}, &logits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find("KV cache full"), std::string::npos) << status;
  EXPECT_EQ(model->CachedLength(1).value(), 9);
  EXPECT_FALSE(model->CachedLength(3).ok());
  EXPECT_EQ(model->kv_stats().used_blocks, 5);

  // A rollback in the same batch frees blocks that the growth can use.
  Run(model.get(), {Seq(2, 1, Slice(tokens, 1, 4), {}), Seq(1, 9, Slice(tokens, 9, 13), {})});
  EXPECT_EQ(model->kv_stats().used_blocks, 5);  // 1 + 4.

  // Truncate frees whole blocks only; Release frees everything.
  ASSERT_TRUE(model->Truncate(1, 9).ok());
  EXPECT_EQ(model->kv_stats().used_blocks, 4);
  ASSERT_TRUE(model->Truncate(1, 8).ok());
  EXPECT_EQ(model->kv_stats().used_blocks, 3);
  EXPECT_EQ(model->Truncate(1, 9).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(model->Release(1).ok());
  ASSERT_TRUE(model->Release(2).ok());
  EXPECT_EQ(model->kv_stats().used_blocks, 0);
  EXPECT_EQ(model->kv_stats().num_sequences, 0);
  EXPECT_EQ(model->Release(1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(model->Truncate(1, 0).code(), absl::StatusCode::kNotFound);
  Run(model.get(), {Seq(4, 0, Slice(tokens, 0, 24), {23})});  // All 6 blocks.
  EXPECT_EQ(model->kv_stats().free_blocks, 0);
}

}  // namespace
}  // namespace tandem
