// Prompt lookup's tree proposals: the continuations of a matched n-gram's earlier
// occurrences merged into a trie, most recent first, within the branch and node budgets.
#include <algorithm>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "coordinator/prompt_lookup.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

PromptLookup Make(const std::vector<int32_t>& tokens, int branches) {
  absl::StatusOr<PromptLookup> lookup = PromptLookup::Create({1, 3, branches});
  EXPECT_TRUE(lookup.ok()) << lookup.status();
  lookup->Append(tokens);
  return *std::move(lookup);
}

// "1 2" occurs at 0, 5 and 10 before the suffix, followed by 3 4 9.., 3 5 8.., 6 7 1..
const std::vector<int32_t> kThreeOccurrences = {1, 2, 3, 4, 9, 1, 2, 3, 5, 8, 1, 2, 6, 7, 1, 2};

TEST(PromptLookupTreeTest, MergesSharedPrefixesMostRecentFirst) {
  const PromptLookup lookup = Make(kThreeOccurrences, 3);
  const PromptLookupTree tree = lookup.ProposeTree(3, 9);
  // 6 7 1 (latest), then 3 5 8, then 4 9 under the shared 3.
  EXPECT_THAT(tree.tokens, ElementsAre(6, 7, 1, 3, 5, 8, 4, 9));
  EXPECT_THAT(tree.parents, ElementsAre(-1, 0, 1, -1, 3, 4, 3, 6));
  EXPECT_FALSE(tree.IsChain());
}

TEST(PromptLookupTreeTest, RespectsNodeAndBranchBudgets) {
  const PromptLookup three = Make(kThreeOccurrences, 3);
  const PromptLookupTree cut = three.ProposeTree(3, 5);
  EXPECT_THAT(cut.tokens, ElementsAre(6, 7, 1, 3, 5));
  EXPECT_THAT(cut.parents, ElementsAre(-1, 0, 1, -1, 3));
  const PromptLookupTree shallow = three.ProposeTree(1, 9);
  EXPECT_THAT(shallow.tokens, ElementsAre(6, 3));  // 3 4 9's first token is merged.
  EXPECT_THAT(shallow.parents, ElementsAre(-1, -1));
  const PromptLookupTree two = Make(kThreeOccurrences, 2).ProposeTree(3, 9);
  EXPECT_THAT(two.tokens, ElementsAre(6, 7, 1, 3, 5, 8));
  EXPECT_THAT(two.parents, ElementsAre(-1, 0, 1, -1, 3, 4));
  EXPECT_THAT(three.ProposeTree(0, 9).tokens, IsEmpty());
  EXPECT_THAT(three.ProposeTree(3, 0).tokens, IsEmpty());
}

TEST(PromptLookupTreeTest, ARepeatedContinuationIsNotABranch) {
  // "1 2" followed by 3 twice (latest), then by 4.
  const PromptLookup lookup = Make({7, 1, 2, 4, 8, 1, 2, 3, 9, 1, 2, 3, 6, 1, 2}, 2);
  const PromptLookupTree tree = lookup.ProposeTree(1, 8);
  EXPECT_THAT(tree.tokens, ElementsAre(3, 4));
  EXPECT_THAT(tree.parents, ElementsAre(-1, -1));
}

TEST(PromptLookupTreeTest, OneBranchIsTodaysChain) {
  const PromptLookup lookup = Make(kThreeOccurrences, 1);
  const PromptLookupTree tree = lookup.ProposeTree(3, 9);
  EXPECT_THAT(tree.tokens, ElementsAre(6, 7, 1));
  EXPECT_TRUE(tree.IsChain());
  EXPECT_EQ(tree.tokens, lookup.Propose(3));
  EXPECT_THAT(Make({1, 2, 3}, 4).ProposeTree(4, 16).tokens, IsEmpty());  // No match.
}

// Depth of node i (1 under the root); checks parents[i] in [-1, i).
std::vector<int> Depths(const PromptLookupTree& tree) {
  std::vector<int> depth(tree.size());
  for (int i = 0; i < tree.size(); ++i) {
    EXPECT_GE(tree.parents[i], -1);
    EXPECT_LT(tree.parents[i], i);
    depth[i] = tree.parents[i] < 0 ? 1 : depth[tree.parents[i]] + 1;
  }
  return depth;
}

// Every structural promise on random contexts: valid parents, distinct siblings, depth,
// node and leaf budgets, the latest occurrence's chain as the first path, and one
// branch giving exactly Propose's chain.
TEST(PromptLookupTreeTest, RandomContextsKeepTheTreeContract) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 300; ++iter) {
    const int branches = 1 + rng() % 4;
    std::vector<int32_t> ctx(rng() % 120);
    for (int32_t& t : ctx) t = static_cast<int32_t>(rng() % (2 + iter % 5));
    const PromptLookup lookup = Make(ctx, branches);
    for (const auto& [depth, nodes] : {std::pair{1, 4}, {3, 5}, {4, 16}, {8, 64}}) {
      const PromptLookupTree tree = lookup.ProposeTree(depth, nodes);
      ASSERT_EQ(tree.parents.size(), tree.tokens.size());
      EXPECT_LE(tree.size(), nodes);
      const std::vector<int> d = Depths(tree);
      std::set<std::pair<int, int32_t>> children;
      std::vector<bool> has_child(tree.size(), false);
      for (int i = 0; i < tree.size(); ++i) {
        EXPECT_LE(d[i], depth);
        EXPECT_TRUE(children.insert({tree.parents[i], tree.tokens[i]}).second) << "sibling";
        if (tree.parents[i] >= 0) has_child[tree.parents[i]] = true;
      }
      EXPECT_LE(std::count(has_child.begin(), has_child.end(), false), branches);
      const std::vector<int32_t> chain = lookup.Propose(std::min(depth, nodes));
      ASSERT_GE(tree.size(), static_cast<int>(chain.size()));
      for (size_t i = 0; i < chain.size(); ++i) {
        EXPECT_EQ(tree.tokens[i], chain[i]);
        EXPECT_EQ(tree.parents[i], static_cast<int>(i) - 1);
      }
      if (branches == 1) {
        EXPECT_EQ(tree.tokens, chain);
      }
      EXPECT_EQ(lookup.ProposeTree(depth, nodes).tokens, tree.tokens);  // Deterministic.
    }
  }
}

}  // namespace
}  // namespace tandem::coordinator
