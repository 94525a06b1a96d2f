// HostSampleDrafts (the reference of Backend::SampleDrafts) against direct calls of the
// spec library the draft worker made on the host: greedy point masses, seeded draws
// from the sparse top-q_size distribution, the per-row error of an all-NaN row, and the
// checks of the call.
#include "kernels/accept/draft_sample.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/accept/accept_test_util.h"
#include "spec/rng.h"
#include "spec/sampling.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr int kVocab = 48;
constexpr int kQSizes[] = {1, 8, 32, kVocab + 5};

// Row-major logits of the given row kinds (accept_test_util.h's RandomRow).
std::vector<float> Rows(std::mt19937_64& rng, const std::vector<int>& kinds) {
  std::vector<float> logits;
  for (int kind : kinds) {
    const std::vector<float> row = accept::testing::RandomRow(rng, kVocab, kind);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

absl::Span<const float> Row(const std::vector<float>& logits, int r) {
  return absl::MakeConstSpan(logits).subspan(size_t(r) * kVocab, kVocab);
}

DraftRow Draft(int row, const spec::SamplingConfig& sampling, int q_size, uint64_t seed,
               uint64_t position) {
  DraftRow draft;
  draft.row = row;
  draft.sampling = sampling;
  draft.q_size = q_size;
  draft.seed = seed;
  draft.position = position;
  return draft;
}

// Every row kind but the all-NaN one (5), in one batch.
const std::vector<int> kSampleableKinds = {0, 1, 2, 3, 4, 6};

TEST(HostSampleDraftsTest, GreedyIsThePointMassAtTheArgmax) {
  std::mt19937_64 rng(1);
  const std::vector<float> logits = Rows(rng, kSampleableKinds);
  std::vector<DraftRow> drafts;
  for (int r = 0; r < int(kSampleableKinds.size()); ++r) {
    for (int q_size : kQSizes) drafts.push_back(Draft(r, {}, q_size, rng(), rng() % 100));
  }
  std::vector<DraftProposal> proposals;
  ASSERT_TRUE(HostSampleDrafts(logits, kVocab, drafts, &proposals).ok());
  ASSERT_EQ(proposals.size(), drafts.size());
  for (size_t i = 0; i < drafts.size(); ++i) {
    SCOPED_TRACE("draft row " + std::to_string(i));
    const int32_t argmax = spec::Argmax(Row(logits, drafts[i].row));
    ASSERT_GE(argmax, 0);
    EXPECT_TRUE(proposals[i].status.ok()) << proposals[i].status;
    EXPECT_EQ(proposals[i].token, argmax);
    EXPECT_EQ(proposals[i].q.ids, std::vector<int32_t>{argmax});
    EXPECT_EQ(proposals[i].q.probs, std::vector<float>{1.0f});
  }
}

TEST(HostSampleDraftsTest, SampledIsTheSeededDrawFromTheSparseTopQ) {
  std::mt19937_64 rng(2);
  const std::vector<float> logits = Rows(rng, kSampleableKinds);
  const int rows = static_cast<int>(kSampleableKinds.size());
  std::vector<DraftRow> drafts;
  for (int trial = 0; trial < 40; ++trial) {
    spec::SamplingConfig sampling = accept::testing::RandomSampling(rng, kVocab, false);
    if (trial % 4 == 1) sampling.top_k = 5;
    if (trial % 4 == 2) sampling.top_p = 0.6f;
    // Rows in no particular order, each used several times.
    drafts.push_back(Draft(int(rng() % rows), sampling, kQSizes[trial % 4], rng(), rng() % 1000));
  }
  std::vector<DraftProposal> proposals;
  ASSERT_TRUE(HostSampleDrafts(logits, kVocab, drafts, &proposals).ok());
  ASSERT_EQ(proposals.size(), drafts.size());
  std::vector<float> probs;
  for (size_t i = 0; i < drafts.size(); ++i) {
    SCOPED_TRACE("draft row " + std::to_string(i));
    const DraftRow& draft = drafts[i];
    spec::ProcessLogits(Row(logits, draft.row), draft.sampling, &probs);
    const spec::SparseDistribution q = spec::TopKSparse(probs, draft.q_size);
    const double u =
        spec::UniformDouble(draft.seed, spec::RandomStream::kDraftSample, draft.position);
    const int32_t token = spec::SampleFromSparse(q, u);
    ASSERT_GE(token, 0);
    EXPECT_TRUE(proposals[i].status.ok()) << proposals[i].status;
    EXPECT_EQ(proposals[i].token, token);
    EXPECT_EQ(proposals[i].q.ids, q.ids);
    EXPECT_EQ(proposals[i].q.probs, q.probs);
    // q: the at most q_size most likely tokens with positive probability.
    int positive = 0;
    for (float p : probs) positive += p > 0.0f;
    EXPECT_EQ(proposals[i].q.ids.size(), size_t(std::min(draft.q_size, positive)));
    if (draft.q_size == 1) {
      EXPECT_EQ(proposals[i].q.ids, std::vector<int32_t>{token});
      EXPECT_EQ(proposals[i].q.probs, std::vector<float>{1.0f});
    }
  }
}

TEST(HostSampleDraftsTest, CoupledIsTheGumbelArgmaxWithAPointMass) {
  std::mt19937_64 rng(5);
  const std::vector<float> logits = Rows(rng, kSampleableKinds);
  const int rows = static_cast<int>(kSampleableKinds.size());
  std::vector<DraftRow> drafts;
  for (int trial = 0; trial < 60; ++trial) {
    spec::SamplingConfig sampling = accept::testing::RandomSampling(rng, kVocab, trial % 10 == 0);
    if (trial % 4 == 1) sampling.top_k = 5;
    DraftRow draft = Draft(int(rng() % rows), sampling, kQSizes[trial % 4], rng(), rng() % 1000);
    draft.coupled = true;
    drafts.push_back(draft);
  }
  std::vector<DraftProposal> proposals;
  ASSERT_TRUE(HostSampleDrafts(logits, kVocab, drafts, &proposals).ok());
  ASSERT_EQ(proposals.size(), drafts.size());
  std::vector<float> probs;
  int differs_from_inverse_cdf = 0;
  for (size_t i = 0; i < drafts.size(); ++i) {
    SCOPED_TRACE("draft row " + std::to_string(i));
    const DraftRow& draft = drafts[i];
    spec::ProcessLogits(Row(logits, draft.row), draft.sampling, &probs);
    const int32_t token = spec::GumbelSample(probs, draft.seed, draft.position);
    ASSERT_GE(token, 0);
    EXPECT_TRUE(proposals[i].status.ok()) << proposals[i].status;
    EXPECT_EQ(proposals[i].token, token);
    EXPECT_GT(probs[token], 0.0f);
    EXPECT_EQ(proposals[i].q.ids, std::vector<int32_t>{token});
    EXPECT_EQ(proposals[i].q.probs, std::vector<float>{1.0f});
    const double u =
        spec::UniformDouble(draft.seed, spec::RandomStream::kDraftSample, draft.position);
    differs_from_inverse_cdf +=
        token != spec::SampleFromSparse(spec::TopKSparse(probs, draft.q_size), u);
  }
  EXPECT_GT(differs_from_inverse_cdf, 0);  // The flag selects another draw.
}

TEST(HostSampleDraftsTest, SeedsAndPositionsChangeTheDraw) {
  // A flat row: q is uniform over its 32 lowest ids, so draws vary with the uniform.
  const std::vector<float> flat(kVocab, 0.0f);
  const spec::SamplingConfig sampling{1.0f, 0, 1.0f};
  std::vector<DraftRow> drafts;
  for (uint64_t seed : {1, 2}) {
    for (uint64_t position = 0; position < 64; ++position) {
      drafts.push_back(Draft(0, sampling, 32, seed, position));
    }
  }
  std::vector<DraftProposal> proposals;
  ASSERT_TRUE(HostSampleDrafts(flat, kVocab, drafts, &proposals).ok());
  ASSERT_EQ(proposals.size(), 128u);
  std::set<int32_t> seed1_tokens;
  int differing_seeds = 0;
  for (size_t i = 0; i < 64; ++i) {
    ASSERT_TRUE(proposals[i].status.ok()) << proposals[i].status;
    EXPECT_EQ(proposals[i].q.ids.size(), 32u);
    EXPECT_LT(proposals[i].token, 32);
    seed1_tokens.insert(proposals[i].token);
    differing_seeds += proposals[i].token != proposals[64 + i].token;
  }
  EXPECT_GT(seed1_tokens.size(), 10u) << "positions do not change the draw";
  EXPECT_GT(differing_seeds, 32) << "seeds do not change the draw";
  // The draw is a function of (seed, position) alone: the same key repeats it.
  std::vector<DraftProposal> again;
  ASSERT_TRUE(HostSampleDrafts(flat, kVocab, {drafts[70], drafts[5]}, &again).ok());
  EXPECT_EQ(again[0].token, proposals[70].token);
  EXPECT_EQ(again[1].token, proposals[5].token);
}

TEST(HostSampleDraftsTest, AllNanRowFailsOnlyItsDraftRows) {
  std::mt19937_64 rng(3);
  const std::vector<float> logits = Rows(rng, {0, 5, 1});
  const spec::SamplingConfig greedy, sampled{0.8f, 0, 1.0f};
  const std::vector<DraftRow> drafts = {Draft(0, greedy, 8, 1, 0), Draft(1, greedy, 8, 1, 0),
                                        Draft(1, sampled, 8, 1, 0), Draft(2, sampled, 8, 1, 0)};
  std::vector<DraftProposal> proposals;
  ASSERT_TRUE(HostSampleDrafts(logits, kVocab, drafts, &proposals).ok());
  ASSERT_EQ(proposals.size(), 4u);
  for (size_t i : {1, 2}) {
    EXPECT_EQ(proposals[i].status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(proposals[i].status.message(), HasSubstr("draft row " + std::to_string(i)));
    EXPECT_EQ(proposals[i].token, -1);
    EXPECT_TRUE(proposals[i].q.ids.empty());
    EXPECT_TRUE(proposals[i].q.probs.empty());
  }
  EXPECT_TRUE(proposals[0].status.ok()) << proposals[0].status;
  EXPECT_EQ(proposals[0].token, spec::Argmax(Row(logits, 0)));
  EXPECT_TRUE(proposals[3].status.ok()) << proposals[3].status;
  EXPECT_GE(proposals[3].token, 0);
  EXPECT_FALSE(proposals[3].q.ids.empty());
}

TEST(ValidateDraftRowsTest, RowsAndQSizes) {
  EXPECT_TRUE(ValidateDraftRows({}, 0).ok());
  EXPECT_TRUE(
      ValidateDraftRows({Draft(0, {}, 1, 0, 0), Draft(2, {}, kMaxDraftQSize, 0, 0)}, 3).ok());
  const std::vector<DraftRow> bad = {Draft(-1, {}, 8, 0, 0), Draft(3, {}, 8, 0, 0),
                                     Draft(0, {}, 0, 0, 0), Draft(0, {}, kMaxDraftQSize + 1, 0, 0)};
  const std::vector<float> logits(3 * kVocab, 0.0f);
  std::vector<DraftProposal> proposals;
  for (const DraftRow& draft : bad) {
    SCOPED_TRACE("row " + std::to_string(draft.row) + " q_size " + std::to_string(draft.q_size));
    const std::vector<DraftRow> drafts = {Draft(1, {}, 8, 0, 0), draft};
    const absl::Status status = ValidateDraftRows(drafts, 3);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("draft row 1"));
    EXPECT_EQ(HostSampleDrafts(logits, kVocab, drafts, &proposals), status);
  }
}

TEST(HostSampleDraftsTest, ShapesAndOutputReplacement) {
  const std::vector<float> logits(2 * kVocab, 0.0f);
  std::vector<DraftProposal> proposals(5);
  EXPECT_EQ(HostSampleDrafts(logits, 0, {}, &proposals).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HostSampleDrafts(absl::MakeConstSpan(logits).subspan(1), kVocab, {}, &proposals).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(HostSampleDrafts(logits, kVocab, {Draft(1, {}, 8, 0, 0)}, &proposals).ok());
  EXPECT_EQ(proposals.size(), 1u);
  ASSERT_TRUE(HostSampleDrafts(logits, kVocab, {}, &proposals).ok());
  EXPECT_TRUE(proposals.empty());
}

// Top tokens: for a greedy row the plain softmax's most likely tokens with their
// probabilities as they are (descending, the argmax first), for a sampled row those of
// the processed distribution; the proposal itself is unchanged by asking.
TEST(HostSampleDraftsTest, TopTokensWithTheirProbabilities) {
  std::mt19937_64 rng(7);
  const std::vector<float> logits = Rows(rng, {0, 0});
  spec::SamplingConfig hot;
  hot.temperature = 0.7f;
  hot.top_k = 10;
  std::vector<DraftRow> drafts = {Draft(0, {}, 8, 3, 11), Draft(1, hot, 8, 3, 12)};
  std::vector<DraftProposal> plain, with_top;
  ASSERT_TRUE(HostSampleDrafts(logits, kVocab, drafts, &plain).ok());
  drafts[0].top = 4;
  drafts[1].top = kMaxDraftTop;
  ASSERT_TRUE(HostSampleDrafts(logits, kVocab, drafts, &with_top).ok());
  spec::SamplingConfig softmax;
  softmax.temperature = 1.0f;
  const spec::SamplingConfig configs[] = {softmax, hot};
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(plain[r].top.ids.empty());
    EXPECT_EQ(with_top[r].token, plain[r].token);
    EXPECT_EQ(with_top[r].q.ids, plain[r].q.ids);
    std::vector<float> probs;
    spec::ProcessLogits(Row(logits, r), configs[r], &probs);
    const int want = std::min<int>(
        drafts[r].top, std::count_if(probs.begin(), probs.end(), [](float p) { return p > 0; }));
    ASSERT_EQ(static_cast<int>(with_top[r].top.ids.size()), want);
    std::vector<int32_t> order(kVocab);
    for (int i = 0; i < kVocab; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
    for (int j = 0; j < want; ++j) {
      EXPECT_EQ(with_top[r].top.ids[j], order[j]);
      EXPECT_FLOAT_EQ(with_top[r].top.probs[j], probs[order[j]]);
    }
  }
  EXPECT_EQ(with_top[0].top.ids[0], with_top[0].token);  // Greedy: the argmax leads.
  drafts[0].top = kMaxDraftTop + 1;
  EXPECT_THAT(HostSampleDrafts(logits, kVocab, drafts, &with_top).message(),
              HasSubstr("draft row 0: top"));
  EXPECT_TRUE(AnyDraftTop(drafts));
  drafts[0].top = drafts[1].top = 0;
  EXPECT_FALSE(AnyDraftTop(drafts));
}

}  // namespace
}  // namespace tandem
