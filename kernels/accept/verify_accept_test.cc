#include "kernels/accept/verify_accept.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec/acceptance.h"
#include "spec/rng.h"
#include "spec/sampling.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr int kVocab = 64;

// Entry (r, v) of the test matrix: distinct and recognisable.
float Entry(int r, int v) { return 1000.0f * r + v; }

// The documented layout of LogitsView: `parts` vocabulary slices one after the other.
std::vector<float> SlicedLayout(int rows, int vocab, int parts) {
  const int slice = vocab / parts;
  std::vector<float> data(size_t(rows) * vocab);
  for (int r = 0; r < rows; ++r) {
    for (int v = 0; v < vocab; ++v) {
      data[size_t(v / slice) * rows * slice + size_t(r) * slice + v % slice] = Entry(r, v);
    }
  }
  return data;
}

TEST(ToRowMajorTest, HandWrittenTwoParts) {
  // 2 rows of 4: slice 0 holds columns 0-1 of both rows, slice 1 columns 2-3.
  const std::vector<float> data = {0, 1, 10, 11, 2, 3, 12, 13};
  std::vector<float> out = {99};
  ASSERT_TRUE(ToRowMajor(LogitsView{data.data(), 2, 4, 2}, &out).ok());
  EXPECT_EQ(out, (std::vector<float>{0, 1, 2, 3, 10, 11, 12, 13}));
}

TEST(ToRowMajorTest, OneTwoAndFourParts) {
  const int rows = 5, vocab = 12;
  for (int parts : {1, 2, 4}) {
    SCOPED_TRACE("parts " + std::to_string(parts));
    const std::vector<float> data = SlicedLayout(rows, vocab, parts);
    std::vector<float> out;
    ASSERT_TRUE(ToRowMajor(LogitsView{data.data(), rows, vocab, parts}, &out).ok());
    ASSERT_EQ(out.size(), size_t(rows) * vocab);
    for (int r = 0; r < rows; ++r) {
      for (int v = 0; v < vocab; ++v) ASSERT_EQ(out[size_t(r) * vocab + v], Entry(r, v));
    }
    if (parts == 1) {
      EXPECT_EQ(out, data);
    }
  }
}

TEST(ToRowMajorTest, EmptyAndMalformedViews) {
  std::vector<float> out = {1, 2};
  ASSERT_TRUE(ToRowMajor(LogitsView{nullptr, 0, 8, 2}, &out).ok());
  EXPECT_TRUE(out.empty());
  const float data[8] = {};
  const LogitsView bad[] = {
      {nullptr, 1, 8, 1},  // No data.
      {data, -1, 8, 1},    // Negative rows.
      {data, 1, 0, 1},     // No vocabulary.
      {data, 1, 8, 0},     // No parts.
      {data, 1, 8, 3},     // 3 does not divide 8.
  };
  for (const LogitsView& view : bad) {
    SCOPED_TRACE(testing::Message()
                 << "rows " << view.rows << " vocab " << view.vocab << " parts " << view.parts);
    EXPECT_EQ(ValidateLogitsView(view).code(), absl::StatusCode::kInvalidArgument);
    const absl::Status status = ToRowMajor(view, &out);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("logits view"));
  }
  EXPECT_TRUE(ValidateLogitsView(LogitsView{data, 1, 8, 4}).ok());
}

VerifyChain ChainAt(int first_row, int k) {
  VerifyChain chain;
  chain.first_row = first_row;
  chain.proposals.resize(k);
  return chain;
}

TEST(ValidateChainRowsTest, ChainsMustFitTheRows) {
  // Rows 0..5: a K = 2 chain may start at 0..3.
  EXPECT_TRUE(ValidateChainRows({}, 0).ok());
  EXPECT_TRUE(ValidateChainRows({ChainAt(0, 2), ChainAt(3, 2), ChainAt(5, 0)}, 6).ok());
  const absl::Status past = ValidateChainRows({ChainAt(0, 2), ChainAt(4, 2)}, 6);
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(past.message()), HasSubstr("verify chain 1: logit rows 4..6"));
  EXPECT_EQ(ValidateChainRows({ChainAt(-1, 0)}, 6).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateChainRows({ChainAt(0, 0)}, 0).code(), absl::StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------ HostVerifyAccept

// What HostVerifyAccept must give for one chain: the spec library called directly.
VerifyOutcome Reference(const std::vector<float>& logits, const VerifyChain& chain) {
  const size_t k = chain.proposals.size();
  const auto row = [&](size_t i) {
    return absl::MakeConstSpan(logits).subspan((chain.first_row + i) * kVocab, kVocab);
  };
  std::vector<std::vector<float>> probs(k + 1);
  std::vector<absl::Span<const float>> spans;
  for (size_t i = 0; i <= k; ++i) {
    spec::ProcessLogits(row(i), chain.sampling, &probs[i]);
    spans.push_back(probs[i]);
  }
  VerifyOutcome out;
  absl::StatusOr<spec::AcceptanceResult> result =
      spec::AcceptProposals(chain.proposals, spans, chain.params, chain.key);
  if (!result.ok()) {
    out.status = result.status();
    return out;
  }
  out.committed = result->committed;
  out.num_accepted = result->num_accepted;
  if (chain.want_logprobs) {
    for (size_t j = 0; j < out.committed.size(); ++j) {
      out.logprobs.push_back(static_cast<float>(spec::CommittedLogProb(
          row(j), probs[j], out.committed[j], chain.sampling.temperature <= 0.0f)));
    }
  }
  return out;
}

void ExpectSameOutcome(const VerifyOutcome& got, const VerifyOutcome& want) {
  EXPECT_EQ(got.status, want.status);
  EXPECT_EQ(got.committed, want.committed);
  EXPECT_EQ(got.num_accepted, want.num_accepted);
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
  for (size_t j = 0; j < got.logprobs.size(); ++j) {
    EXPECT_EQ(std::memcmp(&got.logprobs[j], &want.logprobs[j], sizeof(float)), 0)
        << "logprob " << j << ": " << got.logprobs[j] << " vs " << want.logprobs[j];
  }
}

std::vector<float> RandomLogits(int rows, float scale, std::mt19937* gen) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(size_t(rows) * kVocab);
  for (float& x : logits) x = normal(*gen);
  return logits;
}

struct ChainSpec {
  const char* name;
  spec::AcceptanceRule rule;
  spec::SamplingConfig sampling;
};

// A chain of K proposals at `first_row` drawn the way the draft worker draws them:
// from the sparse top-8 q of a draft distribution close to the target's row (the
// target row plus noise), so every rule accepts some proposals and rejects others.
// Greedy proposals are point masses at the draft argmax.
VerifyChain DraftChain(const std::vector<float>& logits, int first_row, int k,
                       const ChainSpec& spec, bool want_logprobs, uint64_t seed,
                       std::mt19937* gen) {
  VerifyChain chain;
  chain.first_row = first_row;
  chain.sampling = spec.sampling;
  chain.params.rule = spec.rule;
  chain.key = {seed, uint64_t(first_row) * 7};
  chain.want_logprobs = want_logprobs;
  std::normal_distribution<float> noise(0.0f, 0.7f);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const bool greedy = spec.sampling.temperature <= 0.0f;
  spec::SamplingConfig draft_sampling = spec.sampling;
  if (greedy) draft_sampling.temperature = 1.0f;
  std::vector<float> draft(kVocab), probs;
  for (int i = 0; i < k; ++i) {
    for (int v = 0; v < kVocab; ++v) {
      draft[v] = logits[size_t(first_row + i) * kVocab + v] + noise(*gen);
    }
    spec::Proposal p;
    if (greedy) {
      p.token = spec::Argmax(draft);
      p.q = spec::PointMass(p.token);
    } else {
      spec::ProcessLogits(draft, draft_sampling, &probs);
      p.q = spec::TopKSparse(probs, 8);
      p.token = spec::SampleFromSparse(p.q, uniform(*gen));
    }
    chain.proposals.push_back(std::move(p));
  }
  return chain;
}

const ChainSpec kSpecs[] = {
    {"greedy", spec::AcceptanceRule::kGreedy, {0.0f, 0, 1.0f}},
    {"rejection", spec::AcceptanceRule::kRejection, {1.0f, 0, 1.0f}},
    {"rejection top-k top-p", spec::AcceptanceRule::kRejection, {0.8f, 10, 0.9f}},
    {"threshold", spec::AcceptanceRule::kThreshold, {0.7f, 0, 1.0f}},
    {"ratio top-p", spec::AcceptanceRule::kRatio, {1.2f, 0, 0.8f}},
    {"position top-k", spec::AcceptanceRule::kPosition, {0.9f, 5, 1.0f}},
    {"typical", spec::AcceptanceRule::kTypical, {1.0f, 0, 1.0f}},
};

TEST(HostVerifyAcceptTest, EqualsTheSpecLibraryForEveryRuleAndK) {
  std::mt19937 gen(7);
  int full = 0, partial = 0;
  for (const ChainSpec& spec : kSpecs) {
    SCOPED_TRACE(spec.name);
    for (int trial = 0; trial < 8; ++trial) {
      // K = 0..4 chains one after the other, then one reusing rows at the start.
      std::vector<VerifyChain> chains;
      int rows = 0;
      const std::vector<float> logits = RandomLogits(20, 2.5f, &gen);
      for (int k = 0; k <= 4; ++k) {
        chains.push_back(DraftChain(logits, rows, k, spec, (k + trial) % 2 == 0, trial, &gen));
        rows += k + 1;
      }
      chains.push_back(DraftChain(logits, 1, 3, spec, true, trial + 100, &gen));
      std::vector<VerifyOutcome> outcomes(2);  // Replaced.
      ASSERT_TRUE(HostVerifyAccept(logits, kVocab, chains, &outcomes).ok());
      ASSERT_EQ(outcomes.size(), chains.size());
      for (size_t c = 0; c < chains.size(); ++c) {
        SCOPED_TRACE(testing::Message() << "trial " << trial << ", chain " << c);
        const VerifyOutcome& got = outcomes[c];
        ExpectSameOutcome(got, Reference(logits, chains[c]));
        ASSERT_TRUE(got.status.ok()) << got.status;
        const int k = static_cast<int>(chains[c].proposals.size());
        ASSERT_EQ(got.committed.size(), size_t(got.num_accepted) + 1);
        EXPECT_EQ(got.logprobs.size(), chains[c].want_logprobs ? got.committed.size() : 0u);
        for (float lp : got.logprobs) EXPECT_LE(lp, 0.0f);
        for (int j = 0; j < got.num_accepted; ++j) {
          EXPECT_EQ(got.committed[j], chains[c].proposals[j].token);
        }
        if (k > 0) (got.num_accepted == k ? full : partial)++;
      }
    }
  }
  // The proposals exercise both outcomes of the rules.
  RecordProperty("full", full);
  RecordProperty("partial", partial);
  EXPECT_GT(full, 20);
  EXPECT_GT(partial, 20);
}

TEST(HostVerifyAcceptTest, AllNanChainFailsAloneWithInvalidArgument) {
  std::mt19937 gen(11);
  std::vector<float> logits = RandomLogits(9, 2.0f, &gen);
  const ChainSpec& rejection = kSpecs[1];
  const ChainSpec& greedy = kSpecs[0];
  std::vector<VerifyChain> chains = {
      DraftChain(logits, 0, 2, rejection, true, 1, &gen),
      DraftChain(logits, 3, 2, rejection, true, 2, &gen),
      DraftChain(logits, 6, 2, greedy, true, 3, &gen),
  };
  for (size_t i = 3 * kVocab; i < 6 * kVocab; ++i) {
    logits[i] = std::numeric_limits<float>::quiet_NaN();
  }
  std::vector<VerifyOutcome> outcomes;
  ASSERT_TRUE(HostVerifyAccept(logits, kVocab, chains, &outcomes).ok());
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[1].status.code(), absl::StatusCode::kInvalidArgument) << outcomes[1].status;
  EXPECT_TRUE(outcomes[1].committed.empty());
  EXPECT_TRUE(outcomes[1].logprobs.empty());
  EXPECT_EQ(outcomes[1].num_accepted, 0);
  for (size_t c : {0, 2}) {
    EXPECT_TRUE(outcomes[c].status.ok()) << outcomes[c].status;
    EXPECT_FALSE(outcomes[c].committed.empty());
    ExpectSameOutcome(outcomes[c], Reference(logits, chains[c]));
  }
}

TEST(HostVerifyAcceptTest, CallErrors) {
  const std::vector<float> logits(3 * kVocab, 0.0f);
  std::vector<VerifyOutcome> outcomes;
  EXPECT_EQ(HostVerifyAccept(logits, 0, {}, &outcomes).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HostVerifyAccept(logits, 5, {}, &outcomes).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status outside =
      HostVerifyAccept(logits, kVocab, {ChainAt(0, 1), ChainAt(1, 2)}, &outcomes);
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(outside.message()), HasSubstr("verify chain 1"));
  outcomes.resize(4);
  ASSERT_TRUE(HostVerifyAccept(logits, kVocab, {}, &outcomes).ok());
  EXPECT_TRUE(outcomes.empty());
}

}  // namespace
}  // namespace tandem
