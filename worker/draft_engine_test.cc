// Draft engine against an independent plain-decoding reference on its own model, and
// its error for a distribution with nothing to sample.
#include "worker/draft_engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/llama.h"
#include "model/output_consumers.h"
#include "model/weights.h"
#include "spec/rng.h"
#include "spec/sampling.h"
#include "worker/draft_engine_test_fixture.h"
#include "worker/test_util.h"

namespace tandem {
namespace worker {
namespace {

using testing::Greedy;
using testing::Sampled;

constexpr int kVocab = 1000;  // kWideVocabCheckpoint.

class DraftEngineTest : public DraftEngineFixture {
 protected:
  // Feeds prompt[0..n-2] so that a draft can start at n-1 with the last prompt token.
  void Prefill(uint64_t id, const std::vector<int32_t>& prompt) {
    SequenceInput in;
    in.seq_id = id;
    in.tokens.assign(prompt.begin(), prompt.end() - 1);
    std::vector<float> logits;
    ASSERT_TRUE(ForwardToHost(*model_.executor, {in}, &logits).ok());
  }

  static v1::DraftSequence Seq(uint64_t id, const std::vector<int32_t>& prompt, int k,
                               const v1::SequenceSampling& sampling, int top_k = 0) {
    v1::DraftSequence s;
    s.set_sequence_id(id);
    s.set_start_position(static_cast<uint32_t>(prompt.size() - 1));
    s.add_tokens(prompt.back());
    s.set_num_draft_tokens(k);
    *s.mutable_sampling() = sampling;
    s.set_proposal_top_k(top_k);
    return s;
  }

  absl::StatusOr<v1::DraftResponse> Draft(std::vector<v1::DraftSequence> seqs) {
    v1::DraftRequest request;
    for (auto& s : seqs) *request.add_sequences() = s;
    return engine_->Draft(request);
  }
};

void ExpectSameProposal(const v1::ProposedToken& a, const v1::ProposedToken& b, int i) {
  EXPECT_EQ(a.token(), b.token()) << "proposal " << i;
  ASSERT_EQ(a.q_ids_size(), b.q_ids_size()) << "proposal " << i;
  for (int j = 0; j < a.q_ids_size(); ++j) {
    EXPECT_EQ(a.q_ids(j), b.q_ids(j)) << "proposal " << i << " entry " << j;
    EXPECT_EQ(a.q_probs(j), b.q_probs(j)) << "proposal " << i << " entry " << j;
  }
}

TEST_F(DraftEngineTest, DraftingKThenRollingBackEqualsDraftingFewer) {
  const std::vector<int32_t> prompt = testing::Tokens(12, kVocab, 1);
  Prefill(7, prompt);
  for (const v1::SequenceSampling& sampling :
       {Sampled(0.9f, 42), Sampled(1.3f, 5, v1::ACCEPTANCE_RULE_REJECTION, 50, 0.9f), Greedy()}) {
    auto six = Draft({Seq(7, prompt, 6, sampling)});
    ASSERT_TRUE(six.ok()) << six.status();
    ASSERT_EQ(six->sequences(0).proposals_size(), 6);
    EXPECT_EQ(six->sequences(0).cached_length(), prompt.size() + 5);
    // The same start position rolls the cache back; fewer tokens, same prefix.
    auto three = Draft({Seq(7, prompt, 3, sampling)});
    ASSERT_TRUE(three.ok()) << three.status();
    ASSERT_EQ(three->sequences(0).proposals_size(), 3);
    EXPECT_EQ(three->sequences(0).cached_length(), prompt.size() + 2);
    for (int i = 0; i < 3; ++i) {
      ExpectSameProposal(three->sequences(0).proposals(i), six->sequences(0).proposals(i), i);
    }
  }
}

// Pre-drafting an outcome (j proposals accepted, then token t) on a branch forked from
// the drafted sequence proposes exactly what the sequence's own next Draft from that
// prefix proposes; the branch's writes (into a shared partial block: block size 8,
// prefix lengths 13..15) leave the parent intact; forking the parent back from the
// branch adopts the branch's cache; releasing everything frees every block.
TEST_F(DraftEngineTest, BranchesProposeWhatAFreshDraftOfTheirPrefixProposes) {
  const std::vector<int32_t> prompt = testing::Tokens(12, kVocab, 4);
  const int n = static_cast<int>(prompt.size());
  const int base_used = model_.executor->kv_stats().used_blocks;
  for (const v1::SequenceSampling& sampling :
       {Greedy(), Sampled(0.9f, 42), Sampled(1.1f, 7, v1::ACCEPTANCE_RULE_COUPLED)}) {
    Prefill(1, prompt);
    auto parent = Draft({Seq(1, prompt, 5, sampling)});
    ASSERT_TRUE(parent.ok()) << parent.status();
    const v1::DraftedSequence& d = parent->sequences(0);
    // Outcomes: j = 1..3 accepted, emitted token t != d_{j+1}; one branch each.
    std::vector<v1::DraftSequence> branches;
    std::vector<std::vector<int32_t>> prefixes;
    for (int j = 1; j <= 3; ++j) {
      std::vector<int32_t> prefix = prompt;
      for (int i = 0; i < j; ++i) prefix.push_back(d.proposals(i).token());
      prefix.push_back((d.proposals(j).token() + 1) % kVocab);
      v1::DraftSequence b = Seq(100 + j, prefix, 4, sampling);
      b.set_fork_from(1);
      EXPECT_EQ(b.start_position(), static_cast<uint32_t>(n + j));
      branches.push_back(b);
      prefixes.push_back(prefix);
    }
    auto drafted = Draft(branches);
    ASSERT_TRUE(drafted.ok()) << drafted.status();
    for (int j = 1; j <= 3; ++j) {
      const v1::DraftedSequence& got = drafted->sequences(j - 1);
      EXPECT_EQ(got.cached_length(), static_cast<uint32_t>(n + j + 4));
      // The parent's own next draft after that outcome (its cache rolled back to n + j),
      // after re-drafting it as before (the previous outcome's draft overwrote n + j).
      ASSERT_TRUE(Draft({Seq(1, prompt, 5, sampling)}).ok());
      auto fresh = Draft({Seq(1, prefixes[j - 1], 4, sampling)});
      ASSERT_TRUE(fresh.ok()) << fresh.status();
      ASSERT_EQ(got.proposals_size(), 4);
      for (int i = 0; i < 4; ++i) {
        ExpectSameProposal(got.proposals(i), fresh->sequences(0).proposals(i), i);
      }
    }
    // The parent's prefix was not touched by the branches: drafting it again from n
    // proposes what it first did.
    auto again = Draft({Seq(1, prompt, 5, sampling)});
    ASSERT_TRUE(again.ok()) << again.status();
    for (int i = 0; i < 5; ++i)
      ExpectSameProposal(again->sequences(0).proposals(i), d.proposals(i), i);
    // Adopt branch 102 (outcome j = 2 hit, its first proposal e1 accepted too): sequence
    // 1 forks back from it and drafts on; the proposals continue the branch's.
    std::vector<int32_t> adopted = prefixes[1];
    adopted.push_back(drafted->sequences(1).proposals(0).token());
    v1::DraftSequence back = Seq(1, adopted, 3, sampling);
    back.set_fork_from(102);
    auto continued = Draft({back});
    ASSERT_TRUE(continued.ok()) << continued.status();
    for (int i = 0; i < 3; ++i) {
      ExpectSameProposal(continued->sequences(0).proposals(i),
                         drafted->sequences(1).proposals(i + 1), i);
    }
    for (uint64_t id : {1, 101, 102, 103}) ASSERT_TRUE(model_.executor->Release(id).ok()) << id;
    EXPECT_EQ(model_.executor->kv_stats().used_blocks, base_used);  // No block leaked.
  }
}

// num_top: every proposal comes with the position's top tokens (for greedy the plain
// softmax's, the proposal first); the proposals are those of a call without them.
TEST_F(DraftEngineTest, TopTokensComeWithEveryProposal) {
  const std::vector<int32_t> prompt = testing::Tokens(10, kVocab, 3);
  for (const v1::SequenceSampling& sampling : {Greedy(), Sampled(0.9f, 42)}) {
    Prefill(4, prompt);
    auto plain = Draft({Seq(4, prompt, 3, sampling)});
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(plain->sequences(0).top_size(), 0);
    v1::DraftSequence asked = Seq(4, prompt, 3, sampling);
    asked.set_num_top(5);
    auto with_top = Draft({asked});
    ASSERT_TRUE(with_top.ok()) << with_top.status();
    const v1::DraftedSequence& d = with_top->sequences(0);
    ASSERT_EQ(d.top_size(), 3);
    for (int i = 0; i < 3; ++i) {
      ExpectSameProposal(d.proposals(i), plain->sequences(0).proposals(i), i);
      ASSERT_EQ(d.top(i).ids_size(), 5);
      float sum = 0;
      for (int j = 0; j < 5; ++j) {
        if (j > 0) EXPECT_GE(d.top(i).probs(j - 1), d.top(i).probs(j));
        sum += d.top(i).probs(j);
      }
      EXPECT_LE(sum, 1.0f + 1e-5f);
      if (sampling.temperature() == 0) EXPECT_EQ(d.top(i).ids(0), d.proposals(i).token());
    }
    ASSERT_TRUE(model_.executor->Release(4).ok());
  }
}

TEST_F(DraftEngineTest, ForkingFromAnUnknownSequenceIsNotFound) {
  const std::vector<int32_t> prompt = testing::Tokens(5, kVocab, 6);
  v1::DraftSequence b = Seq(9, prompt, 2, Greedy());
  b.set_fork_from(77);
  EXPECT_EQ(Draft({b}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(model_.executor->CachedLength(9).ok());
}

TEST_F(DraftEngineTest, SparseProposalsAreTheRenormalisedTopKOfTheModel) {
  const std::vector<int32_t> prompt = testing::Tokens(9, kVocab, 2);
  Prefill(3, prompt);
  const float temperature = 0.7f;
  const int top_k = 16;
  auto drafted = Draft({Seq(3, prompt, 4, Sampled(temperature, 9), top_k)});
  ASSERT_TRUE(drafted.ok()) << drafted.status();
  const v1::DraftedSequence& out = drafted->sequences(0);
  ASSERT_EQ(out.proposals_size(), 4);

  // Reference: decode prompt + d1..d3 one token at a time and build the distribution in
  // double precision straight from the definition.
  std::vector<int32_t> chain = prompt;
  for (int i = 0; i < 3; ++i) chain.push_back(out.proposals(i).token());
  const auto logits = testing::DecodeLogits(*reference_.model, chain);
  ASSERT_EQ(logits.size(), chain.size());
  for (int i = 0; i < 4; ++i) {
    const v1::ProposedToken& p = out.proposals(i);
    const std::vector<float>& row = logits[prompt.size() - 1 + i];
    double max = -1e300, total = 0;
    for (float x : row) max = std::max(max, double(x));
    std::vector<double> prob(row.size());
    for (size_t t = 0; t < row.size(); ++t)
      total += prob[t] = std::exp((row[t] - max) / temperature);
    std::vector<int> order(row.size());
    for (size_t t = 0; t < row.size(); ++t) order[t] = static_cast<int>(t);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prob[a] > prob[b]; });
    double kept = 0;
    for (int j = 0; j < top_k; ++j) kept += prob[order[j]];

    ASSERT_EQ(p.q_ids_size(), top_k) << "proposal " << i;
    ASSERT_EQ(p.q_probs_size(), top_k);
    double sum = 0;
    bool has_token = false;
    for (int j = 0; j < top_k; ++j) {
      EXPECT_EQ(p.q_ids(j), order[j]) << "proposal " << i << " rank " << j;
      EXPECT_NEAR(p.q_probs(j), prob[order[j]] / kept, 2e-5) << "proposal " << i;
      sum += p.q_probs(j);
      has_token |= p.q_ids(j) == p.token() && p.q_probs(j) > 0;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "proposal " << i;
    EXPECT_TRUE(has_token) << "proposal " << i << " token " << p.token() << " not in q";
    // Drawn from q with the seed's kDraftSample stream at the proposal's position.
    const spec::SparseDistribution q{{p.q_ids().begin(), p.q_ids().end()},
                                     {p.q_probs().begin(), p.q_probs().end()}};
    const double u = spec::UniformDouble(9, spec::RandomStream::kDraftSample, prompt.size() + i);
    EXPECT_EQ(p.token(), spec::SampleFromSparse(q, u)) << "proposal " << i;
  }
}

// Under the coupled rule each proposal is the Gumbel-max token of the processed draft
// distribution at its absolute position, with a point-mass q.
TEST_F(DraftEngineTest, CoupledProposalsAreTheGumbelArgmaxAtEachPosition) {
  const std::vector<int32_t> prompt = testing::Tokens(9, kVocab, 6);
  Prefill(5, prompt);
  const v1::SequenceSampling sampling = Sampled(0.8f, 21, v1::ACCEPTANCE_RULE_COUPLED, 20, 0.95f);
  auto drafted = Draft({Seq(5, prompt, 5, sampling)});
  ASSERT_TRUE(drafted.ok()) << drafted.status();
  const v1::DraftedSequence& out = drafted->sequences(0);
  ASSERT_EQ(out.proposals_size(), 5);
  std::vector<int32_t> chain = prompt;
  for (int i = 0; i < 4; ++i) chain.push_back(out.proposals(i).token());
  const auto logits = testing::DecodeLogits(*reference_.model, chain);
  std::vector<float> probs;
  for (int i = 0; i < 5; ++i) {
    const v1::ProposedToken& p = out.proposals(i);
    spec::ProcessLogits(logits[prompt.size() - 1 + i], spec::SamplingConfig{0.8f, 20, 0.95f},
                        &probs);
    EXPECT_EQ(p.token(), spec::GumbelSample(probs, 21, prompt.size() + i)) << "proposal " << i;
    ASSERT_EQ(p.q_ids_size(), 1);
    EXPECT_EQ(p.q_ids(0), p.token());
    EXPECT_EQ(p.q_probs(0), 1.0f);
  }
}

TEST_F(DraftEngineTest, GreedyProposalsAreTheArgmaxChain) {
  const std::vector<int32_t> prompt = testing::Tokens(10, kVocab, 3);
  Prefill(11, prompt);
  auto drafted = Draft({Seq(11, prompt, 7, Greedy())});
  ASSERT_TRUE(drafted.ok()) << drafted.status();
  const std::vector<int32_t> expected = testing::GreedyContinuation(*reference_.model, prompt, 7);
  ASSERT_EQ(expected.size(), 7u);
  const v1::DraftedSequence& out = drafted->sequences(0);
  ASSERT_EQ(out.proposals_size(), 7);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(out.proposals(i).token(), expected[i]) << "proposal " << i;
    ASSERT_EQ(out.proposals(i).q_ids_size(), 1);
    EXPECT_EQ(out.proposals(i).q_ids(0), expected[i]);
    EXPECT_EQ(out.proposals(i).q_probs(0), 1.0f);
  }
}

TEST_F(DraftEngineTest, BatchingDoesNotChangeProposals) {
  const std::vector<int32_t> a = testing::Tokens(8, kVocab, 4), b = testing::Tokens(13, kVocab, 5);
  Prefill(1, a);
  Prefill(2, b);
  Prefill(3, a);
  Prefill(4, b);
  auto alone_a = Draft({Seq(1, a, 5, Sampled(0.8f, 1))});
  auto alone_b = Draft({Seq(2, b, 2, Greedy())});
  auto together = Draft({Seq(4, b, 2, Greedy()), Seq(3, a, 5, Sampled(0.8f, 1))});
  ASSERT_TRUE(alone_a.ok() && alone_b.ok() && together.ok());
  ASSERT_EQ(together->sequences(0).sequence_id(), 4u);
  ASSERT_EQ(together->sequences(1).proposals_size(), 5);
  ASSERT_EQ(together->sequences(0).proposals_size(), 2);
  for (int i = 0; i < 5; ++i) {
    ExpectSameProposal(together->sequences(1).proposals(i), alone_a->sequences(0).proposals(i), i);
  }
  for (int i = 0; i < 2; ++i) {
    ExpectSameProposal(together->sequences(0).proposals(i), alone_b->sequences(0).proposals(i), i);
  }
}

TEST_F(DraftEngineTest, KvExhaustionIsReportedBeforeAnyChange) {
  // 4 MiB of KV at block size 8 holds a few hundred blocks; ask for far more.
  const KvCacheStats kv = model_.executor->kv_stats();
  const std::vector<int32_t> prompt = testing::Tokens(4, kVocab, 6);
  Prefill(5, prompt);
  std::vector<v1::DraftSequence> seqs;
  for (int i = 0; i < kv.total_blocks; ++i) {
    v1::DraftSequence s = Seq(100 + i, {prompt[0]}, 16, Greedy());
    seqs.push_back(s);
  }
  auto drafted = Draft(seqs);
  EXPECT_EQ(drafted.status().code(), absl::StatusCode::kResourceExhausted) << drafted.status();
  EXPECT_EQ(model_.executor->kv_stats().used_blocks, kv.used_blocks + 1);  // Only seq 5.
}

// Every logit of sequence 2 is NaN (its token kNanToken embeds to NaN): the step fails
// with INTERNAL naming that sequence and the position of its proposal, whatever the
// sampling, although sequence 1 before it in the batch drafts fine (also alone after).
TEST(DraftEngineErrorTest, NoFiniteLogitsIsAnInternalErrorNamingTheSequence) {
  constexpr int32_t kNanToken = 9;
  absl::StatusOr<LlamaWeights> weights = LoadLlamaWeights(testing::kTpCheckpoint, 0, 1);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const HostTensor& embed = weights->embed_tokens;
  auto nan_embed = std::make_shared<std::vector<float>>(embed.numel());
  for (int64_t t = 0; t < embed.rows; ++t) {
    for (int64_t j = 0; j < embed.cols; ++j) {
      (*nan_embed)[t * embed.cols + j] =
          t == kNanToken ? std::numeric_limits<float>::quiet_NaN() : embed.At(t, j);
    }
  }
  weights->embed_tokens = {nan_embed->data(), DType::kF32, embed.rows, embed.cols, nan_embed};
  std::unique_ptr<Backend> backend = MakeCpuBackend(1);
  auto model = LlamaModel::Create(*weights, backend.get(), nullptr, LlamaModelOptions{});
  ASSERT_TRUE(model.ok()) << model.status();
  LocalExecutor executor(*std::move(model));
  DraftEngine engine(&executor, DraftEngineOptions{});

  const auto sequence = [](uint64_t id, std::vector<int32_t> tokens,
                           const v1::SequenceSampling& sampling) {
    v1::DraftSequence seq;
    seq.set_sequence_id(id);
    for (int32_t t : tokens) seq.add_tokens(t);
    seq.set_num_draft_tokens(3);
    *seq.mutable_sampling() = sampling;
    return seq;
  };
  for (const v1::SequenceSampling& sampling : {Greedy(), Sampled(0.8f, 3)}) {
    v1::DraftRequest request;
    *request.add_sequences() = sequence(1, {5, 6, 7}, sampling);
    *request.add_sequences() = sequence(2, {8, kNanToken}, sampling);
    absl::StatusOr<v1::DraftResponse> drafted = engine.Draft(request);
    EXPECT_EQ(drafted.status(),
              absl::InternalError("draft: sequence 2 has no finite logits at position 2"));
    request.mutable_sequences()->RemoveLast();
    drafted = engine.Draft(request);
    ASSERT_TRUE(drafted.ok()) << drafted.status();
    EXPECT_EQ(drafted->sequences(0).proposals_size(), 3);
  }
}

}  // namespace
}  // namespace worker
}  // namespace tandem
