// Target engine against an independent plain-decoding reference on its own model.
#include "worker/target_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "spec/rng.h"
#include "spec/sampling.h"
#include "worker/draft_engine.h"
#include "worker/test_util.h"

namespace tandem {
namespace worker {
namespace {

using testing::Greedy;
using testing::PointProposal;

constexpr int kVocab = 128;  // kTpCheckpoint.

class TargetEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = testing::LoadTestExecutor(testing::kTpCheckpoint);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    model_ = *std::move(loaded);
    engine_ = std::make_unique<TargetEngine>(model_.executor.get());
    auto reference = testing::LoadTestModel(testing::kTpCheckpoint);
    ASSERT_TRUE(reference.ok()) << reference.status();
    reference_ = *std::move(reference);
    prompt_ = testing::Tokens(11, kVocab, 21);
    greedy_ = testing::GreedyContinuation(*reference_.model, prompt_, 8);
    ASSERT_EQ(greedy_.size(), 8u);
  }

  absl::StatusOr<v1::PrefillResponse> Prefill(uint64_t id, std::vector<int32_t> tokens,
                                              int start = 0) {
    v1::PrefillRequest request;
    v1::PrefillSequence* s = request.add_sequences();
    s->set_sequence_id(id);
    s->set_start_position(start);
    s->mutable_tokens()->Assign(tokens.begin(), tokens.end());
    return RunPrefill(model_.executor.get(), request);
  }

  static v1::VerifySequence Seq(uint64_t id, int start, std::vector<int32_t> tokens,
                                std::vector<int32_t> proposals,
                                const v1::SequenceSampling& sampling) {
    v1::VerifySequence s;
    s.set_sequence_id(id);
    s.set_start_position(start);
    s.mutable_tokens()->Assign(tokens.begin(), tokens.end());
    for (int32_t p : proposals) *s.add_proposals() = PointProposal(p);
    *s.mutable_sampling() = sampling;
    return s;
  }

  absl::StatusOr<v1::VerifyResponse> Verify(std::vector<v1::VerifySequence> seqs) {
    v1::VerifyRequest request;
    for (auto& s : seqs) *request.add_sequences() = s;
    return engine_->Verify(request);
  }

  std::vector<int32_t> Head() const { return {prompt_.begin(), prompt_.end() - 1}; }
  int Last() const { return static_cast<int>(prompt_.size()) - 1; }

  testing::TestExecutor model_;
  std::unique_ptr<TargetEngine> engine_;
  testing::TestModel reference_;
  std::vector<int32_t> prompt_, greedy_;
};

std::vector<int32_t> Committed(const v1::VerifiedSequence& s) {
  return {s.committed().begin(), s.committed().end()};
}

TEST_F(TargetEngineTest, GreedyCommitsEveryRightProposalAndABonus) {
  ASSERT_TRUE(Prefill(1, Head()).ok());
  auto out = Verify({Seq(1, Last(), {prompt_.back()},
                         {greedy_[0], greedy_[1], greedy_[2], greedy_[3]}, Greedy(true))});
  ASSERT_TRUE(out.ok()) << out.status();
  const v1::VerifiedSequence& s = out->sequences(0);
  EXPECT_EQ(Committed(s), std::vector<int32_t>(greedy_.begin(), greedy_.begin() + 5));
  EXPECT_EQ(s.num_accepted(), 4u);
  EXPECT_EQ(s.cached_length(), prompt_.size() + 4);
  EXPECT_EQ(*model_.executor->CachedLength(1), static_cast<int>(prompt_.size()) + 4);

  // Log-probabilities: log_softmax of the reference logits at each committed position.
  std::vector<int32_t> chain = prompt_;
  chain.insert(chain.end(), greedy_.begin(), greedy_.begin() + 4);
  const auto logits = testing::DecodeLogits(*reference_.model, chain);
  ASSERT_EQ(s.logprobs_size(), 5);
  for (int j = 0; j < 5; ++j) {
    EXPECT_NEAR(s.logprobs(j), testing::LogSoftmaxAt(logits[prompt_.size() - 1 + j], greedy_[j]),
                1e-5)
        << "committed token " << j;
  }
}

TEST_F(TargetEngineTest, GreedyStopsAtTheFirstWrongProposalWithTheCorrection) {
  ASSERT_TRUE(Prefill(2, Head()).ok());
  const int32_t wrong = (greedy_[2] + 1) % kVocab;
  auto out = Verify(
      {Seq(2, Last(), {prompt_.back()}, {greedy_[0], greedy_[1], wrong, greedy_[3]}, Greedy())});
  ASSERT_TRUE(out.ok()) << out.status();
  const v1::VerifiedSequence& s = out->sequences(0);
  EXPECT_EQ(Committed(s), std::vector<int32_t>({greedy_[0], greedy_[1], greedy_[2]}));
  EXPECT_EQ(s.num_accepted(), 2u);
  EXPECT_EQ(s.cached_length(), prompt_.size() + 2);
  EXPECT_EQ(s.logprobs_size(), 0);

  // The rolled-back cache continues exactly like plain decoding.
  auto next = Verify({Seq(2, s.cached_length(), {greedy_[2]}, {greedy_[3], greedy_[4]}, Greedy())});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(Committed(next->sequences(0)),
            std::vector<int32_t>({greedy_[3], greedy_[4], greedy_[5]}));
}

TEST_F(TargetEngineTest, ZeroProposalsIsAPlainDecodeStep) {
  ASSERT_TRUE(Prefill(3, Head()).ok());
  std::vector<int32_t> fed = {prompt_.back()};
  int start = Last();
  const auto logits = testing::DecodeLogits(*reference_.model, [&] {
    std::vector<int32_t> c = prompt_;
    c.insert(c.end(), greedy_.begin(), greedy_.end());
    return c;
  }());
  for (int step = 0; step < 4; ++step) {
    auto out = Verify({Seq(3, start, fed, {}, Greedy(true))});
    ASSERT_TRUE(out.ok()) << out.status();
    const v1::VerifiedSequence& s = out->sequences(0);
    ASSERT_EQ(s.committed_size(), 1);
    EXPECT_EQ(s.committed(0), greedy_[step]) << "step " << step;
    EXPECT_EQ(s.num_accepted(), 0u);
    EXPECT_EQ(s.cached_length(), static_cast<uint32_t>(start + 1));
    EXPECT_NEAR(s.logprobs(0), testing::LogSoftmaxAt(logits[start], greedy_[step]), 1e-5);
    start = s.cached_length();
    fed = {s.committed(0)};
  }
}

TEST_F(TargetEngineTest, SampledZeroProposalStepMatchesTargetOnlySampling) {
  ASSERT_TRUE(Prefill(4, Head()).ok());
  const auto logits = testing::DecodeLogits(*reference_.model, prompt_);
  const v1::SequenceSampling sampling =
      testing::Sampled(0.8f, 77, v1::ACCEPTANCE_RULE_REJECTION, 20, 0.95f, true);
  auto out = Verify({[&] {
    v1::VerifySequence s = Seq(4, Last(), {prompt_.back()}, {}, sampling);
    s.set_sample_index(5);
    return s;
  }()});
  ASSERT_TRUE(out.ok()) << out.status();
  // Target-only sampling at generated index 5: one draw from the processed p.
  std::vector<float> p;
  spec::ProcessLogits(logits.back(), spec::SamplingConfig{0.8f, 20, 0.95f}, &p);
  const int expected =
      spec::SampleFromProbs(p, spec::UniformDouble(77, spec::RandomStream::kResample, 5));
  ASSERT_EQ(out->sequences(0).committed_size(), 1);
  EXPECT_EQ(out->sequences(0).committed(0), expected);
  EXPECT_NEAR(out->sequences(0).logprobs(0), std::log(p[expected]), 1e-6);
}

TEST_F(TargetEngineTest, GreedyTreeFollowsTheArgmaxBranch) {
  ASSERT_TRUE(Prefill(5, Head()).ok());
  // Root children: a wrong token (0) and g0 (1); g0's children: wrong (2), g1 (3);
  // g1's child: wrong (4).
  const auto other = [&](int i) { return (greedy_[i] + 7) % kVocab; };
  v1::VerifySequence s = Seq(5, Last(), {prompt_.back()},
                             {other(0), greedy_[0], other(1), greedy_[1], other(2)}, Greedy(true));
  for (int p : {-1, -1, 1, 1, 3}) s.add_proposal_parents(p);
  auto out = Verify({s});
  ASSERT_TRUE(out.ok()) << out.status();
  const v1::VerifiedSequence& v = out->sequences(0);
  EXPECT_EQ(Committed(v), std::vector<int32_t>({greedy_[0], greedy_[1], greedy_[2]}));
  EXPECT_EQ(v.num_accepted(), 2u);
  EXPECT_EQ(v.cached_length(), prompt_.size() + 2);
  // The kept path is compacted: decoding continues like the chain.
  auto next = Verify({Seq(5, v.cached_length(), {greedy_[2]}, {greedy_[3]}, Greedy())});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(Committed(next->sequences(0)), std::vector<int32_t>({greedy_[3], greedy_[4]}));
}

// A tree verify keeps the accepted path's KV and rolls back the rest (KeepPath): the
// accepted nodes 1 and 3 sit after refused siblings in the pass, yet the next step
// reads exactly what a sequence that was fed prompt + path as a chain reads (same
// sampled token and log-probabilities, bitwise).
TEST_F(TargetEngineTest, TreeVerifyKeepsTheAcceptedPathAndRollsBackTheRest) {
  ASSERT_TRUE(Prefill(60, Head()).ok());
  std::vector<int32_t> fed = prompt_;
  fed.insert(fed.end(), {greedy_[0], greedy_[1]});
  ASSERT_TRUE(Prefill(61, fed).ok());
  const auto other = [&](int i) { return (greedy_[i] + 5) % kVocab; };
  v1::VerifySequence tree = Seq(60, Last(), {prompt_.back()},
                                {other(0), greedy_[0], other(1), greedy_[1], other(2)}, Greedy());
  for (int p : {-1, -1, 1, 1, 3}) tree.add_proposal_parents(p);
  auto out = Verify({tree});
  ASSERT_TRUE(out.ok()) << out.status();
  const v1::VerifiedSequence& v = out->sequences(0);
  ASSERT_EQ(Committed(v), std::vector<int32_t>({greedy_[0], greedy_[1], greedy_[2]}));
  EXPECT_EQ(v.cached_length(), fed.size());
  EXPECT_EQ(*model_.executor->CachedLength(60), static_cast<int>(fed.size()));
  const v1::SequenceSampling sampled =
      testing::Sampled(1.0f, 8, v1::ACCEPTANCE_RULE_REJECTION, 0, 1.0f, true);
  auto after_tree = Verify({Seq(60, v.cached_length(), {greedy_[2]}, {}, sampled)});
  auto after_chain = Verify({Seq(61, fed.size(), {greedy_[2]}, {}, sampled)});
  ASSERT_TRUE(after_tree.ok() && after_chain.ok());
  EXPECT_EQ(Committed(after_tree->sequences(0)), Committed(after_chain->sequences(0)));
  ASSERT_EQ(after_tree->sequences(0).logprobs_size(), 1);
  EXPECT_EQ(after_tree->sequences(0).logprobs(0), after_chain->sequences(0).logprobs(0));
}

// A tree of two equal-depth branches under each deterministic-criterion rule commits
// what the better branch commits when verified alone as a chain (spec::AcceptTree: the
// longer accepted path, then the larger sum of ln p over it, then branch A, the lower
// index), and its cache keeps that branch only.
TEST_F(TargetEngineTest, TreeCommitsWhatItsBestPathCommitsAsAChain) {
  const auto other = [&](int i) { return (greedy_[i] + 3 + i) % kVocab; };
  // Branch A (nodes 0, 2, 4): a wrong token first. Branch B (1, 3, 5): the greedy chain.
  const std::vector<int32_t> branch_a = {other(0), other(1), other(2)};
  const std::vector<int32_t> branch_b = {greedy_[0], greedy_[1], greedy_[2]};
  const std::vector<int32_t> tokens = {branch_a[0], branch_b[0], branch_a[1],
                                       branch_b[1], branch_a[2], branch_b[2]};
  const std::vector<int32_t> parents = {-1, -1, 0, 1, 2, 3};
  std::vector<v1::SequenceSampling> rules;
  rules.push_back(Greedy(true));
  for (v1::AcceptanceRule rule : {v1::ACCEPTANCE_RULE_THRESHOLD, v1::ACCEPTANCE_RULE_RATIO,
                                  v1::ACCEPTANCE_RULE_POSITION, v1::ACCEPTANCE_RULE_TYPICAL}) {
    v1::SequenceSampling s = testing::Sampled(0.7f, 99, rule, 0, 1.0f, true);
    if (rule == v1::ACCEPTANCE_RULE_THRESHOLD) s.set_alpha(0.02f);
    if (rule == v1::ACCEPTANCE_RULE_POSITION) {
      s.set_theta_first(0.05f);
      s.set_theta_last(0.01f);
    }
    rules.push_back(s);
  }
  uint64_t id = 40;
  for (const v1::SequenceSampling& sampling : rules) {
    const uint64_t tree_id = id++, a_id = id++, b_id = id++;
    for (uint64_t sid : {tree_id, a_id, b_id}) ASSERT_TRUE(Prefill(sid, Head()).ok());
    v1::VerifySequence tree = Seq(tree_id, Last(), {prompt_.back()}, tokens, sampling);
    for (int p : parents) tree.add_proposal_parents(p);
    tree.set_sample_index(3);
    v1::VerifySequence a = Seq(a_id, Last(), {prompt_.back()}, branch_a, sampling);
    a.set_sample_index(3);
    v1::VerifySequence b = Seq(b_id, Last(), {prompt_.back()}, branch_b, sampling);
    b.set_sample_index(3);
    auto out = Verify({tree, a, b});
    ASSERT_TRUE(out.ok()) << out.status();
    const v1::VerifiedSequence& t = out->sequences(0);
    // Under sampling the chains' log-probabilities are ln p of each committed token.
    const auto likelihood = [](const v1::VerifiedSequence& v) {
      double sum = 0.0;
      for (uint32_t j = 0; j < v.num_accepted() && j < uint32_t(v.logprobs_size()); ++j) {
        sum += v.logprobs(j);
      }
      return sum;
    };
    const v1::VerifiedSequence &seq_a = out->sequences(1), &seq_b = out->sequences(2);
    const bool b_wins = seq_b.num_accepted() > seq_a.num_accepted() ||
                        (seq_b.num_accepted() == seq_a.num_accepted() && seq_a.num_accepted() > 0 &&
                         likelihood(seq_b) > likelihood(seq_a));
    const v1::VerifiedSequence& best = b_wins ? seq_b : seq_a;
    EXPECT_EQ(Committed(t), Committed(best)) << sampling.rule();
    EXPECT_EQ(t.num_accepted(), best.num_accepted()) << sampling.rule();
    EXPECT_EQ(t.cached_length(), best.cached_length()) << sampling.rule();
    ASSERT_EQ(t.logprobs_size(), best.logprobs_size());
    for (int j = 0; j < t.logprobs_size(); ++j) EXPECT_EQ(t.logprobs(j), best.logprobs(j));
    // The tree's cache holds the winning path: the next step matches the chain's.
    auto next_tree = Verify(
        {Seq(tree_id, t.cached_length(), {t.committed(t.committed_size() - 1)}, {}, Greedy())});
    const uint64_t best_id = &best == &out->sequences(2) ? b_id : a_id;
    auto next_best = Verify({Seq(best_id, best.cached_length(),
                                 {best.committed(best.committed_size() - 1)}, {}, Greedy())});
    ASSERT_TRUE(next_tree.ok() && next_best.ok());
    EXPECT_EQ(Committed(next_tree->sequences(0)), Committed(next_best->sequences(0)));
  }
}

TEST_F(TargetEngineTest, BatchedVerifyEqualsEachSequenceAlone) {
  const std::vector<int32_t> other = testing::Tokens(6, kVocab, 8);
  for (uint64_t id : {10, 11}) ASSERT_TRUE(Prefill(id, Head()).ok());
  for (uint64_t id : {12, 13}) ASSERT_TRUE(Prefill(id, {other.begin(), other.end() - 1}).ok());
  const v1::SequenceSampling sampled =
      testing::Sampled(1.0f, 3, v1::ACCEPTANCE_RULE_REJECTION, 0, 1.0f, true);
  auto a = Verify({Seq(10, Last(), {prompt_.back()}, {greedy_[0], 5, 6}, Greedy(true))});
  auto b = Verify({Seq(12, 5, {other.back()}, {1, 2}, sampled)});
  auto both = Verify({Seq(13, 5, {other.back()}, {1, 2}, sampled),
                      Seq(11, Last(), {prompt_.back()}, {greedy_[0], 5, 6}, Greedy(true))});
  ASSERT_TRUE(a.ok() && b.ok() && both.ok());
  EXPECT_EQ(Committed(both->sequences(1)), Committed(a->sequences(0)));
  EXPECT_EQ(Committed(both->sequences(0)), Committed(b->sequences(0)));
  for (int j = 0; j < a->sequences(0).logprobs_size(); ++j) {
    EXPECT_EQ(both->sequences(1).logprobs(j), a->sequences(0).logprobs(j));
  }
  for (int j = 0; j < b->sequences(0).logprobs_size(); ++j) {
    EXPECT_EQ(both->sequences(0).logprobs(j), b->sequences(0).logprobs(j));
  }
}

// Self-speculation: a draft running the target model itself, with q covering the whole
// vocabulary, proposes exactly p, so rejection sampling accepts every proposal and
// the committed tokens are the draft's samples plus a bonus.
TEST_F(TargetEngineTest, SelfSpeculationUnderRejectionSamplingAcceptsEverything) {
  auto draft_model = testing::LoadTestExecutor(testing::kTpCheckpoint);
  ASSERT_TRUE(draft_model.ok()) << draft_model.status();
  DraftEngine draft(draft_model->executor.get(), DraftEngineOptions{kVocab});
  const v1::SequenceSampling sampling = testing::Sampled(1.0f, 2024);
  ASSERT_TRUE(Prefill(30, Head()).ok());
  v1::PrefillRequest prefill;
  v1::PrefillSequence* p = prefill.add_sequences();
  p->set_sequence_id(30);
  p->mutable_tokens()->Assign(prompt_.begin(), prompt_.end() - 1);
  ASSERT_TRUE(RunPrefill(draft_model->executor.get(), prefill).ok());

  // The coordinator's view: all tokens so far and each cache's valid length.
  std::vector<int32_t> all = prompt_;
  uint32_t target_cached = Last(), draft_cached = Last();
  int accepted = 0, proposed = 0;
  for (int step = 0; step < 5; ++step) {
    const uint32_t draft_start = std::min(draft_cached, target_cached);
    v1::DraftRequest request;
    v1::DraftSequence* d = request.add_sequences();
    d->set_sequence_id(30);
    d->set_start_position(draft_start);
    d->mutable_tokens()->Assign(all.begin() + draft_start, all.end());
    d->set_num_draft_tokens(4);
    *d->mutable_sampling() = sampling;
    auto drafted = draft.Draft(request);
    ASSERT_TRUE(drafted.ok()) << drafted.status();
    draft_cached = drafted->sequences(0).cached_length();
    v1::VerifySequence v =
        Seq(30, target_cached, {all.begin() + target_cached, all.end()}, {}, sampling);
    *v.mutable_proposals() = drafted->sequences(0).proposals();
    v.set_sample_index(static_cast<uint32_t>(all.size() - prompt_.size()));
    auto verified = Verify({v});
    ASSERT_TRUE(verified.ok()) << verified.status();
    const v1::VerifiedSequence& out = verified->sequences(0);
    accepted += out.num_accepted();
    proposed += 4;
    for (uint32_t i = 0; i < out.num_accepted(); ++i) {
      EXPECT_EQ(out.committed(i), drafted->sequences(0).proposals(i).token());
    }
    all.insert(all.end(), out.committed().begin(), out.committed().end());
    target_cached = out.cached_length();
  }
  EXPECT_EQ(accepted, proposed);
}

// A chain gets the same answer whether its request holds only chains or also a tree.
TEST_F(TargetEngineTest, ChainAnswersTheSameNextToATree) {
  for (uint64_t id : {40, 41, 42}) ASSERT_TRUE(Prefill(id, Head()).ok());
  const v1::SequenceSampling sampled =
      testing::Sampled(0.9f, 17, v1::ACCEPTANCE_RULE_THRESHOLD, 0, 1.0f, true);
  const std::vector<int32_t> proposals = {greedy_[0], greedy_[1], 7};
  v1::VerifySequence tree =
      Seq(42, Last(), {prompt_.back()}, {greedy_[0], 9, greedy_[1]}, Greedy(true));
  for (int32_t p : {-1, -1, 0}) tree.add_proposal_parents(p);
  auto alone = Verify({Seq(40, Last(), {prompt_.back()}, proposals, sampled)});
  auto mixed = Verify({Seq(41, Last(), {prompt_.back()}, proposals, sampled), tree});
  ASSERT_TRUE(alone.ok()) << alone.status();
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  const v1::VerifiedSequence& a = alone->sequences(0);
  const v1::VerifiedSequence& m = mixed->sequences(0);
  EXPECT_EQ(Committed(m), Committed(a));
  EXPECT_EQ(m.num_accepted(), a.num_accepted());
  EXPECT_EQ(m.cached_length(), a.cached_length());
  ASSERT_EQ(m.logprobs_size(), a.logprobs_size());
  ASSERT_EQ(a.logprobs_size(), a.committed_size());
  for (int j = 0; j < a.logprobs_size(); ++j) EXPECT_EQ(m.logprobs(j), a.logprobs(j));
  EXPECT_EQ(mixed->sequences(1).num_accepted(), 2u);  // The greedy branch of the tree.
}

// An acceptance error of one sequence fails the request and rolls every sequence of
// the batch back to its start_position.
TEST_F(TargetEngineTest, AcceptanceErrorRollsTheWholeBatchBack) {
  for (uint64_t id : {50, 51}) ASSERT_TRUE(Prefill(id, Head()).ok());
  v1::SequenceSampling unresolved = testing::Sampled(1.0f, 3);
  unresolved.set_rule(v1::ACCEPTANCE_RULE_DEFAULT);
  auto result = Verify({Seq(50, Last(), {prompt_.back()}, {greedy_[0], greedy_[1]}, Greedy()),
                        Seq(51, Last(), {prompt_.back()}, {1}, unresolved)});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(result.status().message()).rfind("verify: sequence 51: ", 0), 0u)
      << result.status();
  for (uint64_t id : {50, 51}) EXPECT_EQ(*model_.executor->CachedLength(id), Last()) << id;
}

TEST_F(TargetEngineTest, PrefillCreatesAndExtends) {
  auto first = Prefill(20, {1, 2, 3});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->cached_lengths(0), 3u);
  auto second = Prefill(20, {4, 5}, 3);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->cached_lengths(0), 5u);
  auto rewound = Prefill(20, {9}, 1);
  ASSERT_TRUE(rewound.ok());
  EXPECT_EQ(*model_.executor->CachedLength(20), 2);
}

}  // namespace
}  // namespace worker
}  // namespace tandem
