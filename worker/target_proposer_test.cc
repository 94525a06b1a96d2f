// The target-leader proposer seam on the worker: a testonly proposer ("the target's
// top-2 tokens at the last committed row") runs inside the verify pass, its candidates
// come back with the verdict and equal the reference model's logits; unserved methods
// are rejected before anything changes; explicit positions reach the model.
#include "worker/target_proposer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "worker/request_validation.h"
#include "worker/target_engine.h"
#include "worker/test_util.h"
#include "worker/verify_acceptance.h"

namespace tandem {
namespace worker {
namespace {

using testing::Greedy;
using testing::PointProposal;

constexpr int kVocab = 128;  // kTpCheckpoint.
constexpr v1::SpeculationMethod kMethod = v1::SPECULATION_METHOD_MEDUSA;

// The two largest logits (ties: lower id) of `row`.
std::vector<int32_t> TopTwo(const std::vector<float>& row) {
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  return {ids[0], ids[1]};
}

// Testonly: proposes the top-2 tokens of the row the final committed token came from,
// as two siblings (children of that token) at the next position.
class TopTwoProposer final : public TargetProposer {
 public:
  v1::SpeculationMethod method() const override { return kMethod; }
  bool wants_hidden_rows() const override { return true; }
  absl::Status Propose(Backend& backend, const ForwardOutputs& outputs,
                       const TargetProposerInput& in, v1::NextCandidates* out) const override {
    saw_hidden = outputs.hidden_rows != nullptr && outputs.hidden_size > 0;
    std::vector<float> logits;
    absl::Status status = backend.CopyLogitsToHost(outputs.logits, &logits);
    if (!status.ok()) return status;
    const size_t vocab = outputs.logits.vocab;
    const std::vector<float> row(logits.begin() + in.last_row * vocab,
                                 logits.begin() + (in.last_row + 1) * vocab);
    const std::vector<int32_t> top = TopTwo(row);
    for (int i = 0; i < std::min(2, in.max_nodes); ++i) {
      *out->add_proposals() = PointProposal(top[i]);
      out->add_parents(-1);
      out->add_positions(in.last_committed_position + 1);
    }
    return absl::OkStatus();
  }
  mutable bool saw_hidden = false;
};

class TargetProposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = testing::LoadTestExecutor(testing::kTpCheckpoint);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    model_ = *std::move(loaded);
    auto proposer = std::make_unique<TopTwoProposer>();
    proposer_ = proposer.get();
    proposers_.Add(std::move(proposer));
    engine_ = std::make_unique<TargetEngine>(model_.executor.get(), &proposers_);
    auto reference = testing::LoadTestModel(testing::kTpCheckpoint);
    ASSERT_TRUE(reference.ok()) << reference.status();
    reference_ = *std::move(reference);
    prompt_ = testing::Tokens(11, kVocab, 21);
    greedy_ = testing::GreedyContinuation(*reference_.model, prompt_, 6);
    v1::PrefillRequest prefill;
    v1::PrefillSequence* s = prefill.add_sequences();
    s->set_sequence_id(1);
    s->mutable_tokens()->Assign(prompt_.begin(), prompt_.end() - 1);
    ASSERT_TRUE(RunPrefill(model_.executor.get(), prefill).ok());
  }

  // Verifies prompt_.back() with the chain `proposals` asking for next candidates.
  v1::VerifyRequest Request(std::vector<int32_t> proposals, v1::SpeculationMethod method) const {
    v1::VerifyRequest request;
    v1::VerifySequence* s = request.add_sequences();
    s->set_sequence_id(1);
    s->set_start_position(static_cast<uint32_t>(prompt_.size()) - 1);
    s->add_tokens(prompt_.back());
    for (int32_t p : proposals) *s->add_proposals() = PointProposal(p);
    *s->mutable_sampling() = Greedy();
    s->mutable_next_candidates()->set_method(method);
    s->mutable_next_candidates()->set_max_nodes(2);
    return request;
  }

  testing::TestExecutor model_;
  TargetProposers proposers_;
  TopTwoProposer* proposer_ = nullptr;
  std::unique_ptr<TargetEngine> engine_;
  testing::TestModel reference_;
  std::vector<int32_t> prompt_, greedy_;
};

TEST_F(TargetProposerTest, CandidatesComeBackWithTheVerdictAndMatchTheLogits) {
  // One right proposal, one wrong: commits greedy_[0] and the correction greedy_[1].
  auto response = engine_->Verify(Request({greedy_[0], (greedy_[1] + 1) % kVocab}, kMethod));
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::VerifiedSequence& out = response->sequences(0);
  EXPECT_EQ(std::vector<int32_t>(out.committed().begin(), out.committed().end()),
            (std::vector<int32_t>{greedy_[0], greedy_[1]}));
  ASSERT_TRUE(out.has_next_candidates());
  const v1::NextCandidates& next = out.next_candidates();
  EXPECT_EQ(next.method(), kMethod);
  EXPECT_TRUE(proposer_->saw_hidden);
  // The correction came from the logits after greedy_[0]: the reference's last row.
  std::vector<int32_t> context = prompt_;
  context.push_back(greedy_[0]);
  const std::vector<std::vector<float>> logits =
      testing::DecodeLogits(*reference_.model, context, 9);
  ASSERT_FALSE(logits.empty());
  const std::vector<int32_t> want = TopTwo(logits.back());
  ASSERT_EQ(next.proposals_size(), 2);
  EXPECT_EQ(next.proposals(0).token(), want[0]);
  EXPECT_EQ(next.proposals(1).token(), want[1]);
  EXPECT_EQ(want[0], greedy_[1]);  // Greedy: the top token is the committed one.
  EXPECT_EQ(std::vector<int32_t>(next.parents().begin(), next.parents().end()),
            (std::vector<int32_t>{-1, -1}));
  // greedy_[0] sits at prompt_.size(), greedy_[1] after it; the candidates follow.
  const int position = static_cast<int>(prompt_.size()) + 2;
  EXPECT_EQ(std::vector<int32_t>(next.positions().begin(), next.positions().end()),
            (std::vector<int32_t>{position, position}));
  EXPECT_EQ(out.cached_length(), prompt_.size() + 1);
}

TEST_F(TargetProposerTest, NoCandidatesUnlessAskedAndUnservedMethodsChangeNothing) {
  v1::VerifyRequest plain = Request({greedy_[0]}, kMethod);
  plain.mutable_sequences(0)->clear_next_candidates();
  auto response = engine_->Verify(plain);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_FALSE(response->sequences(0).has_next_candidates());

  const int cached = *model_.executor->CachedLength(1);
  auto rejected = engine_->Verify(Request({greedy_[1]}, v1::SPECULATION_METHOD_LOOKAHEAD));
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kInvalidArgument) << rejected.status();
  EXPECT_EQ(*model_.executor->CachedLength(1), cached);
}

TEST(VerifyBatchTest, ExplicitProposalPositionsFollowTheCommittedTokens) {
  v1::VerifyRequest request;
  v1::VerifySequence* s = request.add_sequences();
  s->set_start_position(7);
  s->add_tokens(3);
  s->add_tokens(4);
  *s->add_proposals() = PointProposal(5);
  *s->add_proposals() = PointProposal(6);
  EXPECT_TRUE(VerifyBatch(request)[0].positions.empty());
  s->add_proposal_positions(20);
  s->add_proposal_positions(30);
  EXPECT_EQ(VerifyBatch(request)[0].positions, (std::vector<int32_t>{7, 8, 20, 30}));
}

TEST(VerifyValidationTest, ProposalPositionsAndNextCandidatesAreChecked) {
  RequestLimits limits;
  limits.vocab_size = kVocab;
  limits.max_batch_tokens = 64;
  limits.max_speculative_tokens = 4;
  limits.context_length = 100;
  const CachedLengthFn cached = [](uint64_t) -> absl::StatusOr<int> { return 5; };
  v1::VerifyRequest request;
  v1::VerifySequence* s = request.add_sequences();
  s->set_sequence_id(1);
  s->set_start_position(5);
  s->add_tokens(3);
  *s->add_proposals() = PointProposal(5);
  *s->mutable_sampling() = Greedy();
  ASSERT_TRUE(ValidateVerifyRequest(request, limits, cached).ok());
  for (int32_t bad : {-1, 100}) {
    s->clear_proposal_positions();
    s->add_proposal_positions(bad);
    EXPECT_EQ(ValidateVerifyRequest(request, limits, cached).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  s->add_proposal_positions(9);  // Two positions for one proposal.
  EXPECT_EQ(ValidateVerifyRequest(request, limits, cached).code(),
            absl::StatusCode::kInvalidArgument);
  s->clear_proposal_positions();
  s->add_proposal_positions(99);
  EXPECT_TRUE(ValidateVerifyRequest(request, limits, cached).ok());

  s->mutable_next_candidates()->set_method(kMethod);
  s->mutable_next_candidates()->set_max_nodes(2);
  EXPECT_EQ(ValidateVerifyRequest(request, limits, cached).code(),
            absl::StatusCode::kInvalidArgument);  // Nothing served.
  limits.serves_target_method = [](v1::SpeculationMethod m) { return m == kMethod; };
  EXPECT_TRUE(ValidateVerifyRequest(request, limits, cached).ok());
  for (uint32_t bad : {0u, 5u}) {
    s->mutable_next_candidates()->set_max_nodes(bad);
    EXPECT_EQ(ValidateVerifyRequest(request, limits, cached).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace worker
}  // namespace tandem
