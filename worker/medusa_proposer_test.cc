// The Medusa target-leader proposer: top-k order, the tree from medusa_choices, the
// proposer's tree against hand-computed head top-k, and the bundled heads inside a real
// verify of the bundled target.
#include "worker/medusa_proposer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "worker/target_engine.h"
#include "worker/test_util.h"

namespace tandem {
namespace worker {
namespace {

std::vector<int32_t> Tokens(const v1::NextCandidates& c) {
  std::vector<int32_t> out;
  for (const v1::ProposedToken& p : c.proposals()) out.push_back(p.token());
  return out;
}

std::vector<int32_t> Parents(const v1::NextCandidates& c) {
  return std::vector<int32_t>(c.parents().begin(), c.parents().end());
}

TEST(MedusaProposerTest, TopKIsLargestFirstTiesToTheLowerIndex) {
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 2.0f, 0.7f};
  EXPECT_EQ(TopKIndices(row.data(), 5, 3), (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ(TopKIndices(row.data(), 5, 9), (std::vector<int32_t>{1, 3, 4, 0, 2}));
  EXPECT_TRUE(TopKIndices(row.data(), 5, 0).empty());
}

TEST(MedusaProposerTest, TreeFollowsTheChoicesAndTheirOrder) {
  const std::vector<std::vector<int>> choices = {{0}, {1}, {0, 0}, {0, 1}, {1, 0}, {0, 0, 0}};
  const std::vector<std::vector<int32_t>> top = {{10, 11, 12}, {20, 21}, {30}};
  v1::NextCandidates all;
  BuildMedusaTree(choices, top, {}, 100, 0, &all);
  EXPECT_EQ(Tokens(all), (std::vector<int32_t>{10, 11, 20, 21, 20, 30}));
  EXPECT_EQ(Parents(all), (std::vector<int32_t>{-1, -1, 0, 0, 1, 2}));
  for (const v1::ProposedToken& p : all.proposals()) {
    ASSERT_EQ(p.q_ids_size(), 1);
    EXPECT_EQ(p.q_ids(0), p.token());
    EXPECT_EQ(p.q_probs(0), 1.0f);
  }
  v1::NextCandidates four;
  BuildMedusaTree(choices, top, {}, 4, 0, &four);
  EXPECT_EQ(Tokens(four), (std::vector<int32_t>{10, 11, 20, 21}));
  EXPECT_EQ(Parents(four), (std::vector<int32_t>{-1, -1, 0, 0}));
  v1::NextCandidates chain;  // A single path from the root is sent as a chain.
  BuildMedusaTree({{0}, {0, 0}, {0, 0, 0}}, top, {}, 3, 0, &chain);
  EXPECT_EQ(Tokens(chain), (std::vector<int32_t>{10, 20, 30}));
  EXPECT_TRUE(chain.parents().empty());
}

TEST(MedusaProposerTest, NodesNotWorthTheirRowAreLeftOutWithTheirSubtrees) {
  const std::vector<std::vector<int>> choices = {{0}, {1}, {0, 0}, {0, 1}, {1, 0}, {0, 0, 0}};
  const std::vector<std::vector<int32_t>> top = {{10, 11, 12}, {20, 21}, {30}};
  // Path values: {0} .6, {1} .3, {0,0} .3, {0,1} .12, {1,0} .15, {0,0,0} .15.
  const std::vector<std::vector<float>> probs = {{0.6f, 0.3f, 0.1f}, {0.5f, 0.2f}, {0.5f}};
  v1::NextCandidates some;
  BuildMedusaTree(choices, top, probs, 100, 0.14, &some);
  EXPECT_EQ(Tokens(some), (std::vector<int32_t>{10, 11, 20, 20, 30}));
  EXPECT_EQ(Parents(some), (std::vector<int32_t>{-1, -1, 0, 1, 2}));
  v1::NextCandidates pruned;  // {1} (0.3) goes, and {1, 0} with it.
  BuildMedusaTree({{0}, {1}, {1, 0}}, top, {{0.6f, 0.3f}, {1.0f}}, 100, 0.31, &pruned);
  EXPECT_EQ(Tokens(pruned), (std::vector<int32_t>{10}));
  EXPECT_TRUE(pruned.parents().empty());
  v1::NextCandidates root_only;  // Nothing is worth 0.7, but the first path is kept.
  BuildMedusaTree(choices, top, probs, 100, 0.7, &root_only);
  EXPECT_EQ(Tokens(root_only), (std::vector<int32_t>{10}));
  const std::vector<float> logits = {0.0f, std::log(3.0f), -100.0f};
  const std::vector<float> p = SoftmaxAt(logits.data(), 3, {1, 0});
  EXPECT_NEAR(p[0], 0.75, 1e-6);
  EXPECT_NEAR(p[1], 0.25, 1e-6);
}

// Two heads without residual blocks on hidden size 2: with the hidden row (1, 0) head
// i's logits are column 0 of its LM head, written out below.
std::unique_ptr<MedusaHeads> HandHeads(Backend* backend) {
  constexpr int kVocab = 6;
  const std::vector<std::vector<float>> scores = {{0.1f, 0.9f, 0.3f, 0.9f, -2.0f, 0.5f},
                                                  {1.0f, -1.0f, 4.0f, 0.0f, 2.0f, 3.0f}};
  MedusaHostWeights w;
  w.config.num_heads = 2;
  w.config.num_layers = 0;
  w.config.choices = {{0}, {1}, {0, 0}, {2}, {0, 1}, {1, 0}};
  w.hidden_size = 2;
  w.vocab_size = kVocab;
  for (const std::vector<float>& s : scores) {
    auto lm = std::make_shared<std::vector<float>>();
    for (float v : s) lm->insert(lm->end(), {v, 7.0f});
    MedusaHostHead head;
    head.lm_head = HostTensor{lm->data(), DType::kF32, kVocab, 2, lm};
    w.heads.push_back(head);
  }
  auto heads = MedusaHeads::Create(w, backend);
  EXPECT_TRUE(heads.ok()) << heads.status();
  return heads.ok() ? *std::move(heads) : nullptr;
}

TEST(MedusaProposerTest, ProposesTheHandComputedTopKTree) {
  std::unique_ptr<Backend> backend = MakeCpuBackend(1);
  MedusaTargetProposer proposer(HandHeads(backend.get()));
  EXPECT_TRUE(proposer.wants_hidden_rows());
  // Rows of the pass: the proposer must read row 1 (the final committed token's).
  const std::vector<float> hidden = {0.0f, 1.0f, 1.0f, 0.0f};
  ForwardOutputs outputs;
  outputs.logits.rows = 2;
  outputs.hidden_rows = hidden.data();
  outputs.hidden_size = 2;
  TargetProposerInput in;
  in.num_rows = 2;
  in.last_row = 1;
  in.max_nodes = 6;
  v1::NextCandidates out;
  ASSERT_TRUE(proposer.Propose(*backend, outputs, in, &out).ok());
  // Head 0 top-3: 1, 3 (0.9 tie: lower id first), 5. Head 1 top-2: 2, 5.
  EXPECT_EQ(Tokens(out), (std::vector<int32_t>{1, 3, 2, 5, 5, 2}));
  EXPECT_EQ(Parents(out), (std::vector<int32_t>{-1, -1, 0, -1, 0, 1}));
  v1::NextCandidates small;
  in.max_nodes = 2;
  ASSERT_TRUE(proposer.Propose(*backend, outputs, in, &small).ok());
  EXPECT_EQ(Tokens(small), (std::vector<int32_t>{1, 3}));

  outputs.hidden_rows = nullptr;
  v1::NextCandidates none;
  EXPECT_EQ(proposer.Propose(*backend, outputs, in, &none).code(), absl::StatusCode::kInternal);
}

// The bundled heads in a real verify of the bundled target: the candidates come back
// with the verdict, max_nodes of them, a tree of the configured paths.
TEST(MedusaProposerTest, BundledHeadsProposeInsideAVerify) {
  auto loaded = testing::LoadTestExecutor("models/target");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto host = LoadMedusaHeads("models/target", loaded->executor->config());
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(host->has_value());
  auto heads = MedusaHeads::Create(**host, loaded->backend.get());
  ASSERT_TRUE(heads.ok()) << heads.status();
  TargetProposers proposers;
  proposers.Add(std::make_unique<MedusaTargetProposer>(*std::move(heads)));
  TargetEngine engine(loaded->executor.get(), &proposers);
  v1::PrefillRequest prefill;
  prefill.add_sequences()->set_sequence_id(1);
  for (int32_t t : {1, 1569, 286, 1107}) prefill.mutable_sequences(0)->add_tokens(t);
  ASSERT_TRUE(RunPrefill(loaded->executor.get(), prefill).ok());
  v1::VerifyRequest request;
  v1::VerifySequence* s = request.add_sequences();
  s->set_sequence_id(1);
  s->set_start_position(4);
  s->add_tokens(13);  // A newline.
  *s->mutable_sampling() = testing::Greedy();
  s->mutable_next_candidates()->set_method(v1::SPECULATION_METHOD_MEDUSA);
  s->mutable_next_candidates()->set_max_nodes(10);
  auto response = engine.Verify(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_TRUE(response->sequences(0).has_next_candidates());
  const v1::NextCandidates& next = response->sequences(0).next_candidates();
  ASSERT_EQ(next.proposals_size(), 10);
  v1::NextCandidates want;
  const std::vector<std::vector<int>>& choices = (*host)->config.choices;
  std::vector<std::vector<int32_t>> top(4, std::vector<int32_t>(64));
  BuildMedusaTree(choices, top, {}, 10, 0, &want);  // Only the shape: parents.
  EXPECT_EQ(Parents(next), Parents(want));
}

}  // namespace
}  // namespace worker
}  // namespace tandem
