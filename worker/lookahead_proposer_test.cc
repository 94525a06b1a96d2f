// Lookahead's worker half in a real verify pass (CPU, the tp test checkpoint): the
// window's nodes see exactly the paper's mask (each node's argmax equals a plain decode
// of the prompt and its ancestors, a naive reference), they are never
// accepted (even when they carry the target's token) and always rolled back, only the
// acceptable prefix is a tree that acceptance reads, and the results do not depend on
// the batch.
#include "worker/lookahead_proposer.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "spec/sampling.h"
#include "worker/request_validation.h"
#include "worker/target_engine.h"
#include "worker/test_util.h"

namespace tandem {
namespace worker {
namespace {

using testing::Greedy;
using testing::PointProposal;

constexpr int kVocab = 128;  // kTpCheckpoint.
constexpr int kW = 3, kLevels = 2;

class LookaheadProposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = testing::LoadTestExecutor(testing::kTpCheckpoint);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    model_ = *std::move(loaded);
    proposers_.Add(std::make_unique<LookaheadTargetProposer>());
    engine_ = std::make_unique<TargetEngine>(model_.executor.get(), &proposers_);
    auto reference = testing::LoadTestModel(testing::kTpCheckpoint);
    ASSERT_TRUE(reference.ok()) << reference.status();
    reference_ = *std::move(reference);
    prompt_ = testing::Tokens(11, kVocab, 5);
    greedy_ = testing::GreedyContinuation(*reference_.model, prompt_, 4);
    window_ = {testing::Tokens(kW, kVocab, 8), testing::Tokens(kW, kVocab, 9)};
    for (uint64_t id : {1, 2}) Prefill(id);
  }

  void Prefill(uint64_t id) {
    v1::PrefillRequest prefill;
    v1::PrefillSequence* s = prefill.add_sequences();
    s->set_sequence_id(id);
    s->mutable_tokens()->Assign(prompt_.begin(), prompt_.end() - 1);
    ASSERT_TRUE(RunPrefill(model_.executor.get(), prefill).ok());
  }

  // Verifies prompt_.back() with the acceptable tree `tokens`/`parents` then the window
  // (level-major, the lookahead layout).
  void AddSequence(uint64_t id, const std::vector<int32_t>& tokens,
                   const std::vector<int32_t>& parents, v1::VerifyRequest* request) const {
    v1::VerifySequence* s = request->add_sequences();
    s->set_sequence_id(id);
    s->set_start_position(static_cast<uint32_t>(prompt_.size()) - 1);
    s->add_tokens(prompt_.back());
    for (size_t i = 0; i < tokens.size(); ++i) {
      *s->add_proposals() = PointProposal(tokens[i]);
      s->add_proposal_parents(parents[i]);
    }
    const int base = static_cast<int>(tokens.size());
    for (int l = 0; l < kLevels; ++l) {
      for (int j = 0; j < kW; ++j) {
        *s->add_proposals() = PointProposal(window_[l][j]);
        s->add_proposal_parents(l > 0 ? base + (l - 1) * kW + j : (j == 0 ? -1 : base + j - 1));
      }
    }
    s->set_num_acceptable(base);
    *s->mutable_sampling() = Greedy();
    s->mutable_next_candidates()->set_method(v1::SPECULATION_METHOD_LOOKAHEAD);
    s->mutable_next_candidates()->set_max_nodes(kW * kLevels);
  }

  // The naive reference, node by node (level-major): the argmax after the prompt, level 0
  // columns 0..j and, for level 1, level 1 column j, fed in order at consecutive
  // positions.
  std::vector<int32_t> ReferenceJacobiStep() const {
    std::vector<int32_t> want;
    for (int l = 0; l < kLevels; ++l) {
      for (int j = 0; j < kW; ++j) {
        std::vector<int32_t> context = prompt_;
        context.insert(context.end(), window_[0].begin(), window_[0].begin() + j + 1);
        if (l == 1) context.push_back(window_[1][j]);
        want.push_back(spec::Argmax(testing::DecodeLogits(*reference_.model, context, 9).back()));
      }
    }
    return want;
  }

  static std::vector<int32_t> Ids(const google::protobuf::RepeatedField<int32_t>& r) {
    return std::vector<int32_t>(r.begin(), r.end());
  }
  static std::vector<int32_t> Tokens(const v1::NextCandidates& next) {
    std::vector<int32_t> out;
    for (const v1::ProposedToken& p : next.proposals()) out.push_back(p.token());
    return out;
  }

  testing::TestExecutor model_;
  TargetProposers proposers_;
  std::unique_ptr<TargetEngine> engine_;
  testing::TestModel reference_;
  std::vector<int32_t> prompt_, greedy_;
  std::vector<std::vector<int32_t>> window_;
};

TEST_F(LookaheadProposerTest, WindowFollowsThePapersMaskAndIsNeverAccepted) {
  // Acceptable: greedy_[0] -> greedy_[1], and a wrong sibling of greedy_[0].
  v1::VerifyRequest request;
  AddSequence(1, {greedy_[0], greedy_[1], (greedy_[0] + 1) % kVocab}, {-1, 0, -1}, &request);
  auto response = engine_->Verify(request);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::VerifiedSequence& out = response->sequences(0);
  EXPECT_EQ(Ids(out.committed()), (std::vector<int32_t>{greedy_[0], greedy_[1], greedy_[2]}));
  EXPECT_EQ(out.num_accepted(), 2u);
  EXPECT_EQ(out.cached_length(), prompt_.size() + 2);  // The window is rolled back.
  EXPECT_EQ(*model_.executor->CachedLength(1), static_cast<int>(prompt_.size()) + 2);
  ASSERT_TRUE(out.has_next_candidates());
  EXPECT_EQ(out.next_candidates().parents_size(), 0);
  EXPECT_EQ(Tokens(out.next_candidates()), ReferenceJacobiStep());
}

TEST_F(LookaheadProposerTest, WindowNodesCarryingTheTargetsTokensAreStillNotAccepted) {
  window_[0] = {greedy_[0], greedy_[1], greedy_[2]};  // A perfect guess, computed only.
  v1::VerifyRequest request;
  AddSequence(1, {}, {}, &request);
  auto response = engine_->Verify(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(Ids(response->sequences(0).committed()), (std::vector<int32_t>{greedy_[0]}));
  EXPECT_EQ(response->sequences(0).num_accepted(), 0u);
  EXPECT_EQ(Tokens(response->sequences(0).next_candidates()), ReferenceJacobiStep());
}

TEST_F(LookaheadProposerTest, AWarmingUpWindowOfOneLevelGetsEveryColumnsOutput) {
  v1::VerifyRequest request;
  AddSequence(1, {}, {}, &request);
  v1::VerifySequence* s = request.mutable_sequences(0);
  s->mutable_proposals()->DeleteSubrange(kW, kW * (kLevels - 1));  // Level 0 only.
  s->mutable_proposal_parents()->Truncate(kW);
  auto response = engine_->Verify(request);
  ASSERT_TRUE(response.ok()) << response.status();
  const std::vector<int32_t> want = ReferenceJacobiStep();
  EXPECT_EQ(Tokens(response->sequences(0).next_candidates()),
            std::vector<int32_t>(want.begin(), want.begin() + kW));
}

TEST_F(LookaheadProposerTest, BatchInvariant) {
  v1::VerifyRequest alone, both;
  AddSequence(1, {greedy_[0]}, {-1}, &alone);
  AddSequence(2, {(greedy_[0] + 3) % kVocab, greedy_[0]}, {-1, -1}, &both);
  AddSequence(1, {greedy_[0]}, {-1}, &both);
  auto a = engine_->Verify(alone);
  ASSERT_TRUE(a.ok()) << a.status();
  // Sequence 1 back to where it was, then verified next to sequence 2.
  ASSERT_TRUE(model_.executor->Truncate(1, static_cast<int>(prompt_.size()) - 1).ok());
  auto b = engine_->Verify(both);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Ids(b->sequences(1).committed()), Ids(a->sequences(0).committed()));
  EXPECT_EQ(Tokens(b->sequences(1).next_candidates()), Tokens(a->sequences(0).next_candidates()));
  EXPECT_EQ(Ids(b->sequences(0).committed()), Ids(a->sequences(0).committed()));
}

TEST(LookaheadValidationTest, AcceptablePrefixIsTheTreeTheRestNeedsOnlyParents) {
  RequestLimits limits;
  limits.vocab_size = kVocab;
  limits.max_batch_tokens = 64;
  limits.max_speculative_tokens = 8;
  limits.context_length = 100;
  const CachedLengthFn cached = [](uint64_t) -> absl::StatusOr<int> { return 5; };
  v1::VerifyRequest request;
  v1::VerifySequence* s = request.add_sequences();
  s->set_sequence_id(1);
  s->set_start_position(5);
  s->add_tokens(3);
  *s->mutable_sampling() = Greedy();
  for (int32_t token : {7, 9, 7, 7}) *s->add_proposals() = PointProposal(token);
  for (int32_t parent : {-1, -1, -1, 2}) s->add_proposal_parents(parent);
  // Sibling 2 repeats sibling 0's token: a tree must not, a computed-only node may.
  EXPECT_EQ(ValidateVerifyRequest(request, limits, cached).code(),
            absl::StatusCode::kInvalidArgument);
  s->set_num_acceptable(2);
  EXPECT_TRUE(ValidateVerifyRequest(request, limits, cached).ok());
  s->set_num_acceptable(0);
  EXPECT_TRUE(ValidateVerifyRequest(request, limits, cached).ok());
  s->set_num_acceptable(5);
  EXPECT_EQ(ValidateVerifyRequest(request, limits, cached).code(),
            absl::StatusCode::kInvalidArgument);
  s->set_num_acceptable(2);
  s->set_proposal_parents(3, 3);  // Its own parent.
  EXPECT_EQ(ValidateVerifyRequest(request, limits, cached).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace worker
}  // namespace tandem
