// The block-parallel tree acceptance (tree_accept_algorithm.h, run with HostBlock: the
// CUDA kernel's algorithm and reduction order) against the reference (HostVerifyAccept:
// spec::ProcessLogits + spec::AcceptTree + spec::CommittedLogProb): committed tokens,
// accepted paths, log-probabilities and errors, bitwise, over random trees of several
// shapes (random, wide, binary, a path) mixed with chains, every rule, awkward logits
// and vocab-parallel layouts.
#include "kernels/accept/tree_accept_algorithm.h"

#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/accept/accept_test_util.h"
#include "kernels/accept/emulated_verify_accept.h"
#include "kernels/accept/verify_accept.h"
#include "spec/acceptance_params.h"

namespace tandem {
namespace accept {
namespace {

using testing::ExpectSameOutcomes;
using testing::Sliced;

struct RuleCounts {
  int trees = 0, nodes = 0, accepted = 0, deep = 0, later_sibling = 0;
};

// Whether node `j` of `tree` is not its parent's first child.
bool IsLaterSibling(const VerifyChain& tree, int j) {
  for (int i = 0; i < j; ++i) {
    if (tree.parents[i] == tree.parents[j]) return true;
  }
  return false;
}

TEST(TreeAcceptAlgorithmTest, RandomTreesMatchSpecAcceptTreeBitwiseForEveryRule) {
  std::mt19937_64 rng(17);
  std::map<spec::AcceptanceRule, RuleCounts> counts;
  int items = 0, errors = 0;
  for (int vocab : {64, 300, 1000}) {
    for (int parts : {1, 2}) {
      for (int batch_index = 0; batch_index < 10; ++batch_index) {
        const testing::RandomBatch batch = testing::MakeRandomTreeBatch(rng, vocab, 7, batch_index);
        const std::string where =
            absl::StrCat("vocab ", vocab, " parts ", parts, " batch ", batch_index);
        std::vector<VerifyOutcome> expected, got;
        ASSERT_TRUE(HostVerifyAccept(batch.logits, vocab, batch.chains, &expected).ok()) << where;
        const std::vector<float> sliced = Sliced(batch.logits, batch.rows, vocab, parts);
        const absl::Status status = EmulatedVerifyAccept(
            LogitsView{sliced.data(), batch.rows, vocab, parts}, batch.chains, &got);
        ASSERT_TRUE(status.ok()) << where << ": " << status;
        ExpectSameOutcomes(expected, got, where);
        for (size_t c = 0; c < expected.size(); ++c) {
          ++items;
          errors += !expected[c].status.ok();
          const VerifyChain& tree = batch.chains[c];
          if (tree.parents.empty() || !expected[c].status.ok()) continue;
          RuleCounts& rule = counts[tree.params.rule];
          ++rule.trees;
          rule.nodes += static_cast<int>(tree.proposals.size());
          rule.accepted += expected[c].num_accepted;
          rule.deep += expected[c].num_accepted >= 2;
          for (int node : expected[c].path) rule.later_sibling += IsLaterSibling(tree, node);
        }
      }
    }
  }
  EXPECT_EQ(items, 3 * 2 * 10 * 7);
  EXPECT_GT(errors, 0);  // All-NaN rows: the error of the right distribution.
  // Every rule accepts and refuses nodes, goes two deep, and (all but greedy and
  // coupled, whose later siblings are off the target's token) accepts later siblings.
  ASSERT_EQ(counts.size(), 7u);
  for (const auto& [rule, n] : counts) {
    const std::string name(spec::AcceptanceRuleName(rule));
    EXPECT_GT(n.trees, 10) << name;
    EXPECT_GT(n.accepted, 0) << name;
    EXPECT_LT(n.accepted, n.nodes) << name;
    EXPECT_GT(n.deep, 0) << name;
    if (rule == spec::AcceptanceRule::kRejection) {
      EXPECT_GT(n.later_sibling, 0) << name;
    }
  }
}

// A large vocabulary with top-p, trees under rejection (the residual across siblings)
// and a lossy rule, with log-probabilities.
TEST(TreeAcceptAlgorithmTest, LargeVocabularyTrees) {
  constexpr int kVocab = 32000;
  std::mt19937_64 rng(5);
  std::vector<float> logits;
  std::vector<VerifyChain> trees;
  int rows = 0;
  const testing::TreeShape shapes[] = {testing::TreeShape::kWide, testing::TreeShape::kBinary};
  for (int c = 0; c < 2; ++c) {
    const int k = 4;
    for (int i = 0; i <= k; ++i) {
      const std::vector<float> row = testing::RandomRow(rng, kVocab, 0);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    VerifyChain tree = testing::RandomTree(
        rng, logits, kVocab, rows, k, shapes[c],
        c == 0 ? spec::AcceptanceRule::kRejection : spec::AcceptanceRule::kTypical);
    tree.sampling = {0.8f, 0, 0.9f};
    tree.want_logprobs = true;
    trees.push_back(tree);
    rows += k + 1;
  }
  std::vector<VerifyOutcome> expected, got;
  ASSERT_TRUE(HostVerifyAccept(logits, kVocab, trees, &expected).ok());
  ASSERT_TRUE(EmulatedVerifyAccept(LogitsView{logits.data(), rows, kVocab, 1}, trees, &got).ok());
  ExpectSameOutcomes(expected, got, "vocab 32000");
}

TEST(TreeAcceptAlgorithmTest, MalformedParentsAreRefusedBeforeAnyLogitIsRead) {
  std::vector<float> logits(3 * 10, 0.0f);
  VerifyChain tree;
  tree.proposals.resize(2);
  std::vector<VerifyOutcome> outcomes;
  for (const std::vector<int32_t>& parents :
       std::vector<std::vector<int32_t>>{{-1}, {-1, 1}, {0, -1}, {-1, -2}}) {
    tree.parents = parents;
    const absl::Status status =
        EmulatedVerifyAccept(LogitsView{logits.data(), 3, 10, 1}, {tree}, &outcomes);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(HostVerifyAccept(logits, 10, {tree}, &outcomes), status);
  }
}

}  // namespace
}  // namespace accept
}  // namespace tandem
