#include "kernels/accept/accept_test_util.h"

#include <algorithm>
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

namespace {

constexpr spec::AcceptanceRule kRules[] = {
    spec::AcceptanceRule::kGreedy,    spec::AcceptanceRule::kRejection,
    spec::AcceptanceRule::kThreshold, spec::AcceptanceRule::kRatio,
    spec::AcceptanceRule::kPosition,  spec::AcceptanceRule::kTypical,
    spec::AcceptanceRule::kCoupled};
constexpr int kNumRules = sizeof(kRules) / sizeof(kRules[0]);

// The sampling, parameters, key and logprob choice of a random chain or tree.
VerifyChain RandomSettings(std::mt19937_64& rng, int vocab, int first_row,
                           spec::AcceptanceRule rule) {
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
  return chain;
}

// The draft's processed distribution for a row: the target row plus noise, at T 1.
std::vector<float> DraftDistribution(std::mt19937_64& rng, const std::vector<float>& logits,
                                     int vocab, int row) {
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> draft(logits.begin() + size_t(row) * vocab,
                           logits.begin() + size_t(row + 1) * vocab);
  for (float& x : draft) x = std::isfinite(x) ? x + noise(rng) : 0.0f;
  spec::SamplingConfig draft_config;
  draft_config.temperature = 1.0f;
  std::vector<float> q_dense;
  spec::ProcessLogits(draft, draft_config, &q_dense);
  return q_dense;
}

std::vector<int32_t> ShapeParents(std::mt19937_64& rng, int k, TreeShape shape) {
  std::vector<int32_t> parents(k);
  for (int i = 0; i < k; ++i) {
    switch (shape) {
      case TreeShape::kAnyTree:
        parents[i] = static_cast<int32_t>(rng() % (i + 1)) - 1;
        break;
      case TreeShape::kWide:
        parents[i] = -1;
        break;
      case TreeShape::kBinary:
        parents[i] = (i + 1) / 2 - 1;  // Heap order: nodes 0, 1 under the root.
        break;
      case TreeShape::kPath:
        parents[i] = i - 1;
        break;
    }
  }
  return parents;
}

}  // namespace

VerifyChain RandomChain(std::mt19937_64& rng, const std::vector<float>& logits, int vocab,
                        int first_row, int k, spec::AcceptanceRule rule) {
  VerifyChain chain = RandomSettings(rng, vocab, first_row, rule);
  for (int i = 0; i < k; ++i) {
    const std::vector<float> q_dense = DraftDistribution(rng, logits, vocab, first_row + i);
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

VerifyChain RandomTree(std::mt19937_64& rng, const std::vector<float>& logits, int vocab,
                       int first_row, int k, TreeShape shape, spec::AcceptanceRule rule) {
  VerifyChain tree = RandomSettings(rng, vocab, first_row, rule);
  tree.parents = ShapeParents(rng, k, shape);
  tree.proposals.resize(k);
  std::vector<int> depth(k);
  for (int i = 0; i < k; ++i) depth[i] = tree.parents[i] < 0 ? 1 : depth[tree.parents[i]] + 1;
  for (int v = -1; v < k; ++v) {
    const std::vector<float> q_dense = DraftDistribution(rng, logits, vocab, first_row + v + 1);
    spec::SparseDistribution q = spec::TopKSparse(q_dense, 32);
    std::vector<int32_t> taken;
    const auto unused = [&](int32_t t) {
      return std::find(taken.begin(), taken.end(), t) == taken.end();
    };
    const uint64_t position = tree.key.position + (v < 0 ? 0 : depth[v]);
    for (int j = v + 1; j < k; ++j) {
      if (tree.parents[j] != v) continue;
      spec::Proposal& node = tree.proposals[j];
      const bool point = rule == spec::AcceptanceRule::kGreedy ||
                         rule == spec::AcceptanceRule::kCoupled || q.ids.empty();
      if (point) {
        int32_t token = -1;
        if (taken.empty()) {
          token = rule == spec::AcceptanceRule::kCoupled
                      ? spec::GumbelSample(q_dense, tree.key.seed, position)
                      : spec::Argmax(q_dense);
        }
        while (token < 0 || !unused(token)) token = static_cast<int32_t>(rng() % vocab);
        node.token = token;
        node.q = spec::PointMass(token);
      } else {
        node.q = q;
        node.token =
            spec::SampleFromSparse(q, std::uniform_real_distribution<double>(0.0, 1.0)(rng));
        q = spec::SparseWithout(q, node.token);
      }
      taken.push_back(node.token);
    }
  }
  return tree;
}

RandomBatch MakeRandomTreeBatch(std::mt19937_64& rng, int vocab, int num_items, int first_rule) {
  const TreeShape shapes[] = {TreeShape::kAnyTree, TreeShape::kWide, TreeShape::kBinary,
                              TreeShape::kPath};
  RandomBatch batch;
  for (int c = 0; c < num_items; ++c) {
    const bool chain = rng() % 4 == 0;
    const int k = static_cast<int>(chain ? rng() % 8 : 1 + rng() % 9);
    const int kind = rng() % 25 == 0 ? 5 : static_cast<int>(rng() % 5);
    for (int i = 0; i <= k; ++i) {
      const std::vector<float> row = RandomRow(rng, vocab, kind);
      batch.logits.insert(batch.logits.end(), row.begin(), row.end());
    }
    const spec::AcceptanceRule rule = kRules[(first_rule + c) % kNumRules];
    batch.chains.push_back(
        chain ? RandomChain(rng, batch.logits, vocab, batch.rows, k, rule)
              : RandomTree(rng, batch.logits, vocab, batch.rows, k, shapes[c % 4], rule));
    batch.rows += k + 1;
    batch.proposals += k;
  }
  return batch;
}

RandomBatch MakeRandomBatch(std::mt19937_64& rng, int vocab, int num_chains, int first_rule) {
  RandomBatch batch;
  for (int c = 0; c < num_chains; ++c) {
    const int k = static_cast<int>(rng() % 8);
    const int kind = rng() % 25 == 0 ? 5 : static_cast<int>(rng() % 5);
    for (int i = 0; i <= k; ++i) {
      const std::vector<float> row = RandomRow(rng, vocab, kind);
      batch.logits.insert(batch.logits.end(), row.begin(), row.end());
    }
    batch.chains.push_back(
        RandomChain(rng, batch.logits, vocab, batch.rows, k, kRules[(first_rule + c) % kNumRules]));
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
    ASSERT_EQ(expected[c].path, got[c].path) << at;
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
