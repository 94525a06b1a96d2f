#include "kernels/accept/accept_test_util.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tandem {
namespace accept {
namespace testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

}  // namespace

std::vector<float> RandomRow(std::mt19937_64& rng, int vocab, int kind) {
  std::normal_distribution<float> normal(0.0f, kind == 1 ? 6.0f : 2.0f);
  std::uniform_int_distribution<int> pick(0, vocab - 1);
  std::vector<float> row(vocab);
  for (float& x : row) x = normal(rng);
  switch (kind) {
    case 2:
      for (float& x : row) x = std::round(x * 2.0f) / 2.0f;
      break;
    case 3:
      for (int j = 0; j < vocab / 4; ++j) row[pick(rng)] = -kInf;
      for (int j = 0; j < vocab / 8; ++j) row[pick(rng)] = kNan;
      break;
    case 4:
      row[pick(rng)] = kInf;
      row[pick(rng)] = kInf;
      break;
    case 5:
      for (float& x : row) x = kNan;
      break;
    case 6:
      for (float& x : row) x = -kInf;
      break;
    default:
      break;
  }
  return row;
}

spec::SamplingConfig RandomSampling(std::mt19937_64& rng, int vocab, bool greedy) {
  spec::SamplingConfig config;
  if (greedy) return config;
  const float temperatures[] = {0.3f, 0.7f, 1.0f, 1.6f};
  const int top_ks[] = {0, 0, 1, 5, 40, vocab};
  const float top_ps[] = {1.0f, 1.0f, 0.95f, 0.6f, 0.05f};
  config.temperature = temperatures[rng() % 4];
  config.top_k = top_ks[rng() % 6];
  config.top_p = top_ps[rng() % 5];
  return config;
}

VerifyChain RandomChain(std::mt19937_64& rng, const std::vector<float>& logits, int vocab,
                        int first_row, int k, spec::AcceptanceRule rule) {
  VerifyChain chain;
  chain.first_row = first_row;
  const bool greedy = rule == spec::AcceptanceRule::kGreedy;
  chain.sampling = RandomSampling(rng, vocab, greedy);
  if (!greedy && rng() % 6 == 0) chain.sampling.temperature = 0.0f;  // Lossy rules at T 0.
  chain.params.rule = rule;
  if (rule == spec::AcceptanceRule::kThreshold && rng() % 2) chain.params.alpha = 0.05f;
  if (rule == spec::AcceptanceRule::kRatio && rng() % 2) chain.params.alpha = 0.9f;
  chain.key = {rng(), rng() % 1000, rng() % 5000};
  chain.want_logprobs = rng() % 2 == 0;
  std::normal_distribution<float> noise(0.0f, 1.0f);
  for (int i = 0; i < k; ++i) {
    std::vector<float> draft(logits.begin() + size_t(first_row + i) * vocab,
                             logits.begin() + size_t(first_row + i + 1) * vocab);
    for (float& x : draft) x = std::isfinite(x) ? x + noise(rng) : 0.0f;
    spec::SamplingConfig draft_config;
    draft_config.temperature = 1.0f;
    std::vector<float> q_dense;
    spec::ProcessLogits(draft, draft_config, &q_dense);
    spec::Proposal proposal;
    if (rule == spec::AcceptanceRule::kCoupled) {  // The draft's Gumbel-max proposal.
      proposal.token = spec::GumbelSample(q_dense, chain.key.seed, chain.key.position + i);
      proposal.q = spec::PointMass(proposal.token);
    } else {
      proposal.q = spec::TopKSparse(q_dense, 32);
      proposal.token =
          spec::SampleFromSparse(proposal.q, std::uniform_real_distribution<double>(0.0, 1.0)(rng));
    }
    chain.proposals.push_back(proposal);
  }
  return chain;
}

RandomBatch MakeRandomBatch(std::mt19937_64& rng, int vocab, int num_chains, int first_rule) {
  const spec::AcceptanceRule rules[] = {
      spec::AcceptanceRule::kGreedy,    spec::AcceptanceRule::kRejection,
      spec::AcceptanceRule::kThreshold, spec::AcceptanceRule::kRatio,
      spec::AcceptanceRule::kPosition,  spec::AcceptanceRule::kTypical,
      spec::AcceptanceRule::kCoupled};
  constexpr int kNumRules = sizeof(rules) / sizeof(rules[0]);
  RandomBatch batch;
  for (int c = 0; c < num_chains; ++c) {
    const int k = static_cast<int>(rng() % 8);
    const int kind = rng() % 25 == 0 ? 5 : static_cast<int>(rng() % 5);
    for (int i = 0; i <= k; ++i) {
      const std::vector<float> row = RandomRow(rng, vocab, kind);
      batch.logits.insert(batch.logits.end(), row.begin(), row.end());
    }
    batch.chains.push_back(
        RandomChain(rng, batch.logits, vocab, batch.rows, k, rules[(first_rule + c) % kNumRules]));
    batch.rows += k + 1;
    batch.proposals += k;
  }
  return batch;
}

std::vector<float> Sliced(const std::vector<float>& row_major, int rows, int vocab, int parts) {
  const int slice = vocab / parts;
  std::vector<float> out(row_major.size());
  for (int r = 0; r < rows; ++r) {
    for (int v = 0; v < vocab; ++v) {
      out[(size_t(v / slice) * rows + r) * slice + v % slice] = row_major[size_t(r) * vocab + v];
    }
  }
  return out;
}

void ExpectSameOutcomes(const std::vector<VerifyOutcome>& expected,
                        const std::vector<VerifyOutcome>& got, const std::string& where) {
  ASSERT_EQ(expected.size(), got.size()) << where;
  for (size_t c = 0; c < expected.size(); ++c) {
    const std::string at = absl::StrCat(where, " chain ", c);
    ASSERT_EQ(expected[c].status, got[c].status) << at;
    ASSERT_EQ(expected[c].committed, got[c].committed) << at;
    ASSERT_EQ(expected[c].num_accepted, got[c].num_accepted) << at;
    ASSERT_EQ(expected[c].logprobs.size(), got[c].logprobs.size()) << at;
    for (size_t j = 0; j < expected[c].logprobs.size(); ++j) {
      const float e = expected[c].logprobs[j], g = got[c].logprobs[j];
      if (std::isinf(e)) {
        ASSERT_EQ(e, g) << at << " logprob " << j;
      } else {
        ASSERT_NEAR(e, g, 1e-5f * (1.0f + std::fabs(e))) << at << " logprob " << j;
      }
    }
  }
}

}  // namespace testing
}  // namespace accept
}  // namespace tandem
