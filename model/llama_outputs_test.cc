// LlamaModel's output seam and explicit positions: the hidden rows a consumer asks for
// reproduce the logits through an independent LM head at tp 1 and 2, and explicit
// RoPE positions equal the derived ones bitwise, follow the double reference when
// shifted, and are validated before any cache change.
#include <cmath>
#include <cstring>
#include <thread>

#include "comm/local_communicator.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/llama.h"
#include "model/llama_test_util.h"
#include "model/output_consumers.h"
#include "model/weights.h"

namespace tandem {
namespace {

// f32 model against the double reference (see llama_test.cc for the reasoning).
constexpr double kAbsTol = 1e-4;
constexpr double kRelTol = 1e-4;
// Every dimension divides by 2 (8 heads, 4 KV heads, intermediate 64, vocab 128).
constexpr char kCheckpoint[] = "tests/reference/checkpoints/tiny_f32_tp";

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::abs(got[i] - want[i]), kAbsTol + kRelTol * std::abs(want[i]))
        << what << ": element " << i;
  }
}

// Records what the model hands a consumer that does not ask for hidden rows.
class PointerConsumer final : public ForwardConsumer {
 public:
  absl::Status CheckRows(int) const override { return absl::OkStatus(); }
  absl::Status Consume(Backend&, const ForwardOutputs& outputs) override {
    hidden_rows = outputs.hidden_rows;
    rows = outputs.logits.rows;
    return absl::OkStatus();
  }
  const float* hidden_rows = reinterpret_cast<const float*>(1);
  int rows = -1;
};

// On each of `tp` ranks: a prefill with two rows of sequence 1, then a batch of two
// sequences with five logit rows; the leader's consumer copies logits and hidden rows.
std::vector<HostOutputsConsumer> RunWithHiddenRows(int tp) {
  auto group = LocalGroup::Create(tp);
  EXPECT_TRUE(group.ok()) << group.status();
  if (!group.ok()) return {};
  std::vector<HostOutputsConsumer> outputs(tp);
  std::vector<absl::Status> statuses(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      auto weights = LoadLlamaWeights(kCheckpoint, r, tp);
      statuses[r] = weights.status();
      if (!weights.ok()) return;
      std::unique_ptr<Backend> backend = MakeCpuBackend(1);
      auto model = LlamaModel::Create(*weights, backend.get(), tp > 1 ? (*group)[r].get() : nullptr,
                                      LlamaModelOptions());
      statuses[r] = model.status();
      if (!model.ok()) return;
      const int vocab = weights->config.vocab_size;
      statuses[r] = (*model)->Forward({Seq(1, 0, RandomTokens(9, vocab, 1), {3, 8})}, outputs[r]);
      if (statuses[r].ok()) {
        statuses[r] = (*model)->Forward({Seq(1, 9, RandomTokens(3, vocab, 2), {0, 1, 2}),
                                         Seq(2, 0, RandomTokens(4, vocab, 3), {1, 3})},
                                        outputs[r]);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < tp; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  return outputs;
}

TEST(LlamaOutputsTest, HiddenRowsReproduceTheLogitsThroughTheLmHead) {
  auto full = LoadLlamaWeights(kCheckpoint, 0, 1);
  ASSERT_TRUE(full.ok()) << full.status();
  const size_t hidden = full->config.hidden_size, vocab = full->config.vocab_size;
  for (int tp : {1, 2}) {
    SCOPED_TRACE("tp = " + std::to_string(tp));
    const std::vector<HostOutputsConsumer> outputs = RunWithHiddenRows(tp);
    ASSERT_EQ(outputs.size(), size_t(tp));
    ASSERT_EQ(outputs[0].logits.size(), 5 * vocab);
    ASSERT_EQ(outputs[0].hidden.size(), 5 * hidden);
    ExpectNear(outputs[0].logits, ReferenceLmHead(*full, outputs[0].hidden), "LM head");
    // The residual stream is all-reduced: every rank holds the same full rows.
    for (int r = 1; r < tp; ++r) {
      EXPECT_EQ(std::memcmp(outputs[r].hidden.data(), outputs[0].hidden.data(), hidden * 5 * 4), 0)
          << "rank " << r;
    }
  }
}

TEST(LlamaOutputsTest, HiddenRowsAreOnlyHandedToConsumersThatAskForThem) {
  auto weights = LoadLlamaWeights(kCheckpoint, 0, 1);
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::unique_ptr<Backend> backend = MakeCpuBackend(1);
  auto model = LlamaModel::Create(*weights, backend.get(), nullptr, LlamaModelOptions());
  ASSERT_TRUE(model.ok()) << model.status();
  PointerConsumer consumer;
  ASSERT_TRUE((*model)->Forward({Seq(1, 0, {1, 2, 3}, {2})}, consumer).ok());
  EXPECT_EQ(consumer.hidden_rows, nullptr);
  EXPECT_EQ(consumer.rows, 1);
}

class LlamaPositionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = RandomLlamaWeights(SmallTestConfig(), 21);
    backend_ = MakeCpuBackend(1);
    LlamaModelOptions options;
    options.block_size = 4;
    auto model = LlamaModel::Create(weights_, backend_.get(), nullptr, options);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  std::vector<float> Run(const SequenceInput& in) {
    std::vector<float> logits;
    absl::Status status = ForwardToHost(*model_, {in}, &logits);
    EXPECT_TRUE(status.ok()) << status;
    return logits;
  }

  LlamaWeights weights_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LlamaModel> model_;
};

TEST_F(LlamaPositionsTest, ExplicitDefaultPositionsGiveIdenticalLogits) {
  const std::vector<int32_t> tokens = RandomTokens(6, 96, 4);
  const std::vector<float> chain = Run(Seq(1, 0, tokens, {0, 1, 2, 3, 4, 5}));
  SequenceInput explicit_chain = Seq(2, 0, tokens, {0, 1, 2, 3, 4, 5});
  explicit_chain.positions = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(Run(explicit_chain), chain);
  // A tree after a cached context of 6: depths 0, 1, 1, 2 -> positions 6, 7, 7, 8.
  const std::vector<int32_t> nodes = {5, 9, 13, 17};
  const std::vector<float> tree = Run(Seq(1, 6, nodes, {0, 1, 2, 3}, {-1, 0, 0, 1}));
  SequenceInput explicit_tree = Seq(2, 6, nodes, {0, 1, 2, 3}, {-1, 0, 0, 1});
  explicit_tree.positions = {6, 7, 7, 8};
  EXPECT_EQ(Run(explicit_tree), tree);
}

TEST_F(LlamaPositionsTest, ShiftedPositionsMatchTheReference) {
  const std::vector<int32_t> tokens = RandomTokens(7, 96, 5);
  const std::vector<int32_t> positions = {30, 31, 32, 40, 41, 41, 100};
  SequenceInput in = Seq(1, 0, tokens, {0, 1, 2, 3, 4, 5, 6});
  in.positions = positions;
  const std::vector<float> got = Run(in);
  ExpectNear(got, ReferenceLogits(weights_, tokens, positions), "shifted");
  // And they differ from the derived positions by far more than the tolerance.
  const std::vector<double> derived = ReferenceLogits(weights_, tokens);
  double diff = 0;
  for (size_t i = 0; i < derived.size(); ++i) diff = std::max(diff, std::abs(got[i] - derived[i]));
  EXPECT_GT(diff, 1e-2);
}

TEST_F(LlamaPositionsTest, BadPositionsAreRejectedWithNoCacheChange) {
  ASSERT_EQ(Run(Seq(1, 0, {1, 2, 3, 4, 5}, {4})).size(), 96u);
  const KvCacheStats before = model_->kv_stats();
  const std::vector<std::vector<int32_t>> bad = {{5, -1}, {5, 256}, {5}, {5, 6, 7}};
  for (const std::vector<int32_t>& positions : bad) {
    // Sequence 1 rolls back by one (a truncate on success); sequence 2 is new.
    SequenceInput rollback = Seq(1, 4, {7, 8}, {1});
    rollback.positions = positions;
    std::vector<float> logits;
    const absl::Status status = ForwardToHost(*model_, {Seq(2, 0, {1}, {0}), rollback}, &logits);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(*model_->CachedLength(1), 5);
    EXPECT_FALSE(model_->CachedLength(2).ok());
    EXPECT_EQ(model_->kv_stats().used_blocks, before.used_blocks);
  }
  // A position may exceed what the chain would derive while the cache stays short.
  SequenceInput far = Seq(1, 5, {9}, {0});
  far.positions = {255};
  EXPECT_EQ(Run(far).size(), 96u);
  EXPECT_EQ(*model_->CachedLength(1), 6);
}

}  // namespace
}  // namespace tandem
