// The block-parallel acceptance (accept_algorithm.h, run with HostBlock: the CUDA
// kernel's algorithm and reduction order) against the host reference (spec/ via
// HostVerifyAccept): processed distributions, committed tokens, accepted counts,
// log-probabilities and errors, over every rule, sampling setting and awkward logits
// (ties, -inf, +inf, NaN), vocabularies that are not multiples of the block size and
// vocab-parallel (sliced) layouts.
#include "kernels/accept/accept_algorithm.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/accept/accept_test_util.h"
#include "kernels/accept/draft_sample.h"
#include "kernels/accept/emulated_verify_accept.h"
#include "kernels/accept/host_block.h"
#include "kernels/accept/verify_accept.h"
#include "spec/acceptance.h"
#include "spec/sampling.h"

namespace tandem {
namespace accept {
namespace {

using testing::ExpectSameOutcomes;
using testing::RandomChain;
using testing::RandomRow;
using testing::RandomSampling;
using testing::Sliced;

constexpr float kInf = std::numeric_limits<float>::infinity();

// The processed distribution of one row: same support exactly, values within float
// rounding of the double sums' order.
void ExpectSameDistribution(const std::vector<float>& expected, const std::vector<float>& got,
                            const std::string& where) {
  ASSERT_EQ(expected.size(), got.size()) << where;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(expected[i] > 0.0f, got[i] > 0.0f) << where << " entry " << i;
    ASSERT_NEAR(expected[i], got[i], 1e-6f * expected[i] + 1e-30f) << where << " entry " << i;
  }
}

TEST(AcceptAlgorithmTest, ProcessRowMatchesSpecProcessLogits) {
  std::mt19937_64 rng(11);
  int rows_checked = 0;
  for (int vocab : {1, 7, 256, 300, 1000, 4099}) {
    for (int trial = 0; trial < 60; ++trial) {
      const int kind = trial % 7;
      const std::vector<float> logits = RandomRow(rng, vocab, kind);
      const spec::SamplingConfig config = RandomSampling(rng, vocab, trial % 5 == 0);
      std::vector<float> expected;
      spec::ProcessLogits(logits, config, &expected);
      PackedSampling sampling;
      sampling.temperature = config.temperature;
      sampling.top_k = config.top_k;
      sampling.top_p = config.top_p;
      std::vector<float> got(vocab, -1.0f);
      std::vector<double> work(vocab);
      HostBlock block;
      detail::ProcessRow(
          block, vocab, [&](int i) { return logits[i]; }, sampling, got.data(), work.data());
      ExpectSameDistribution(
          expected, got,
          absl::StrCat("vocab ", vocab, " trial ", trial, " kind ", kind, " T ", config.temperature,
                       " top_k ", config.top_k, " top_p ", config.top_p));
      ++rows_checked;
    }
  }
  EXPECT_EQ(rows_checked, 360);
}

TEST(AcceptAlgorithmTest, TopKAndTopPKeepTiesByLowerIndex) {
  // Weights 3 x 0.3 (indices 1, 4, 6) and 0.1: top-k 2 keeps indices 1 and 4; top-p
  // 0.5 of the mass needs two of the tied entries, again 1 and 4.
  std::vector<float> logits = {std::log(0.1f), std::log(0.3f), -kInf,         -kInf,
                               std::log(0.3f), -kInf,          std::log(0.3f)};
  for (int mode = 0; mode < 2; ++mode) {
    PackedSampling sampling;
    sampling.temperature = 1.0f;
    sampling.top_k = mode == 0 ? 2 : 0;
    sampling.top_p = mode == 0 ? 1.0f : 0.5f;
    std::vector<float> probs(logits.size());
    std::vector<double> work(logits.size());
    HostBlock block;
    detail::ProcessRow(
        block, static_cast<int>(logits.size()), [&](int i) { return logits[i]; }, sampling,
        probs.data(), work.data());
    for (int i = 0; i < static_cast<int>(logits.size()); ++i) {
      EXPECT_EQ(probs[i] > 0.0f, i == 1 || i == 4) << "mode " << mode << " index " << i;
    }
    EXPECT_NEAR(probs[1], 0.5f, 1e-6f);
  }
}

TEST(AcceptAlgorithmTest, ExactBoundariesFollowTheReference) {
  // Four equal weights: top-p 0.5 reaches its target exactly after two entries (the
  // crossing entry is the last one kept), and an inverse-CDF draw at u = 0.5 lands
  // exactly on a bucket edge (the next bucket is taken).
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  PackedSampling sampling;
  sampling.temperature = 1.0f;
  sampling.top_p = 0.5f;
  std::vector<float> probs(4), expected;
  std::vector<double> work(4);
  HostBlock block;
  detail::ProcessRow(
      block, 4, [&](int i) { return logits[i]; }, sampling, probs.data(), work.data());
  spec::ProcessLogits(logits, {1.0f, 0, 0.5f}, &expected);
  EXPECT_EQ(probs, expected);
  EXPECT_EQ(probs, (std::vector<float>{0.5f, 0.5f, 0.0f, 0.0f}));
  const std::vector<float> equal = {0.25f, 0.25f, 0.25f, 0.25f};
  for (double u : {0.0, 0.25, 0.5, 0.75, 0.999}) {
    EXPECT_EQ(detail::SampleInverseCdf(
                  block, 4, [&](int i) { return double(equal[i]); }, u),
              spec::SampleFromProbs(equal, u))
        << "u " << u;
  }
}

TEST(AcceptAlgorithmTest, DeterministicRulesAcrossTheirThresholds) {
  // Two-token rows with p(token 0) on a fine grid, so every threshold (alpha, the
  // position rule's theta_i for each i, the typical bound) falls between grid points.
  const spec::AcceptanceRule rules[] = {
      spec::AcceptanceRule::kThreshold, spec::AcceptanceRule::kRatio,
      spec::AcceptanceRule::kPosition, spec::AcceptanceRule::kTypical};
  int accepted = 0, total = 0;
  for (spec::AcceptanceRule rule : rules) {
    for (int k = 1; k <= 4; ++k) {
      for (int step = 1; step < 40; ++step) {
        const float p = step / 40.0f;
        std::vector<float> logits;
        for (int i = 0; i <= k; ++i) {
          logits.push_back(std::log(p));
          logits.push_back(std::log(1.0f - p));
        }
        VerifyChain chain;
        chain.sampling.temperature = 1.0f;
        chain.params.rule = rule;
        chain.key = {uint64_t(step), 0};
        for (int i = 0; i < k; ++i) {
          spec::Proposal proposal;
          proposal.token = 0;
          proposal.q.ids = {0, 1};
          proposal.q.probs = {0.6f, 0.4f};
          chain.proposals.push_back(proposal);
        }
        std::vector<VerifyOutcome> expected, got;
        ASSERT_TRUE(HostVerifyAccept(logits, 2, {chain}, &expected).ok());
        ASSERT_TRUE(
            EmulatedVerifyAccept(LogitsView{logits.data(), k + 1, 2, 1}, {chain}, &got).ok());
        ExpectSameOutcomes(expected, got,
                           absl::StrCat(spec::AcceptanceRuleName(rule), " k ", k, " p ", p));
        accepted += expected[0].num_accepted;
        total += k;
      }
    }
  }
  EXPECT_GT(accepted, total / 4);
  EXPECT_LT(accepted, total);
}

TEST(AcceptAlgorithmTest, BatchesMatchTheReferenceForEveryRule) {
  std::mt19937_64 rng(2024);
  int chains_checked = 0, accepted = 0, proposals = 0, errors = 0;
  for (int vocab : {8, 300, 1000}) {
    for (int parts : {1, 2, 4}) {
      for (int batch_index = 0; batch_index < 12; ++batch_index) {
        const testing::RandomBatch batch = testing::MakeRandomBatch(rng, vocab, 7, batch_index);
        proposals += batch.proposals;
        const std::string where =
            absl::StrCat("vocab ", vocab, " parts ", parts, " batch ", batch_index);
        std::vector<VerifyOutcome> expected, got;
        ASSERT_TRUE(HostVerifyAccept(batch.logits, vocab, batch.chains, &expected).ok()) << where;
        const std::vector<float> sliced = Sliced(batch.logits, batch.rows, vocab, parts);
        ASSERT_TRUE(EmulatedVerifyAccept(LogitsView{sliced.data(), batch.rows, vocab, parts},
                                         batch.chains, &got)
                        .ok())
            << where;
        ExpectSameOutcomes(expected, got, where);
        for (const VerifyOutcome& outcome : expected) {
          ++chains_checked;
          accepted += outcome.num_accepted;
          errors += !outcome.status.ok();
        }
      }
    }
  }
  EXPECT_EQ(chains_checked, 3 * 3 * 12 * 7);
  // The cases are not degenerate: proposals are accepted and rejected, errors occur.
  EXPECT_GT(accepted, proposals / 5);
  EXPECT_LT(accepted, proposals);
  EXPECT_GT(errors, 0);
}

TEST(AcceptAlgorithmTest, LargeVocabularyWithTopP) {
  // A Llama-sized vocabulary: the bit-by-bit top-k/top-p search over 32000 entries.
  constexpr int kVocab = 32000;
  std::mt19937_64 rng(7);
  std::vector<float> logits;
  std::vector<VerifyChain> chains;
  int rows = 0;
  for (int c = 0; c < 3; ++c) {
    const int k = 3;
    for (int i = 0; i <= k; ++i) {
      const std::vector<float> row = RandomRow(rng, kVocab, c == 1 ? 2 : 0);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    VerifyChain chain = RandomChain(rng, logits, kVocab, rows, k, spec::AcceptanceRule::kRejection);
    chain.sampling = {0.8f, c == 2 ? 50 : 0, 0.9f};
    chain.want_logprobs = true;
    chains.push_back(chain);
    rows += k + 1;
  }
  std::vector<VerifyOutcome> expected, got;
  ASSERT_TRUE(HostVerifyAccept(logits, kVocab, chains, &expected).ok());
  ASSERT_TRUE(EmulatedVerifyAccept(LogitsView{logits.data(), rows, kVocab, 1}, chains, &got).ok());
  ExpectSameOutcomes(expected, got, "vocab 32000");
}

TEST(AcceptAlgorithmTest, DraftSamplingMatchesTheReference) {
  std::mt19937_64 rng(31);
  int rows_checked = 0, failures = 0, sampled = 0;
  for (int vocab : {8, 300, 1000}) {
    for (int parts : {1, 2, 4}) {
      std::vector<float> logits;
      std::vector<DraftRow> drafts;
      const int rows = 24;
      for (int r = 0; r < rows; ++r) {
        const std::vector<float> row = RandomRow(rng, vocab, r % 7);
        logits.insert(logits.end(), row.begin(), row.end());
        DraftRow draft;
        draft.row = (r * 5) % rows;  // Rows out of order, some twice.
        draft.sampling = RandomSampling(rng, vocab, r % 4 == 0);
        const int q_sizes[] = {1, 8, 32, 1024};
        draft.q_size = q_sizes[rng() % 4];
        draft.seed = rng();
        draft.position = rng() % 5000;
        draft.coupled = r % 3 == 1;
        drafts.push_back(draft);
        sampled += draft.sampling.temperature > 0.0f;
      }
      const std::vector<float> sliced = Sliced(logits, rows, vocab, parts);
      std::vector<DraftProposal> expected, got;
      ASSERT_TRUE(HostSampleDrafts(logits, vocab, drafts, &expected).ok());
      ASSERT_TRUE(
          EmulatedSampleDrafts(LogitsView{sliced.data(), rows, vocab, parts}, drafts, &got).ok());
      ASSERT_EQ(expected.size(), got.size());
      for (size_t i = 0; i < expected.size(); ++i) {
        const std::string where = absl::StrCat("vocab ", vocab, " parts ", parts, " draft ", i);
        ASSERT_EQ(expected[i].status, got[i].status) << where;
        ASSERT_EQ(expected[i].token, got[i].token) << where;
        ASSERT_EQ(expected[i].q.ids, got[i].q.ids) << where;
        ASSERT_EQ(expected[i].q.probs.size(), got[i].q.probs.size()) << where;
        for (size_t j = 0; j < expected[i].q.probs.size(); ++j) {
          ASSERT_NEAR(expected[i].q.probs[j], got[i].q.probs[j], 1e-6f * expected[i].q.probs[j])
              << where << " q entry " << j;
        }
        ++rows_checked;
        failures += !expected[i].status.ok();
      }
    }
  }
  EXPECT_EQ(rows_checked, 3 * 3 * 24);
  EXPECT_GT(failures, 0);  // All-NaN rows have no proposal.
  EXPECT_GT(sampled, rows_checked / 2);
}

TEST(AcceptAlgorithmTest, BadViewsAndRowsAreRejected) {
  std::vector<float> logits(4 * 10, 0.0f);
  VerifyChain chain;
  chain.first_row = 2;
  chain.proposals.resize(2);  // Needs rows 2..4 of 4.
  std::vector<VerifyOutcome> outcomes;
  EXPECT_EQ(EmulatedVerifyAccept(LogitsView{logits.data(), 4, 10, 1}, {chain}, &outcomes).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EmulatedVerifyAccept(LogitsView{logits.data(), 4, 10, 3}, {}, &outcomes).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EmulatedVerifyAccept(LogitsView{nullptr, 4, 10, 1}, {}, &outcomes).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace accept
}  // namespace tandem
