// Candidates: depth of chains and trees, and truncation by depth.
#include "coordinator/proposers/candidates.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tandem::coordinator {
namespace {

using ::testing::ElementsAre;

Candidates Make(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents) {
  Candidates c;
  for (int32_t t : tokens) c.tokens.push_back(PointMassProposal(t));
  c.parents = parents;
  return c;
}

std::vector<int32_t> Tokens(const Candidates& c) {
  std::vector<int32_t> out;
  for (const v1::ProposedToken& p : c.tokens) out.push_back(p.token());
  return out;
}

TEST(CandidatesTest, ChainDepthIsItsSizeAndTruncationKeepsThePrefix) {
  Candidates c = Make({5, 6, 7}, {});
  EXPECT_EQ(c.depth(), 3);
  c.positions = {10, 11, 12};
  c.TruncateDepth(2);
  EXPECT_THAT(Tokens(c), ElementsAre(5, 6));
  EXPECT_THAT(c.positions, ElementsAre(10, 11));
  EXPECT_TRUE(c.parents.empty());
  c.TruncateDepth(-1);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(Candidates().depth(), 0);
}

TEST(CandidatesTest, TreeTruncationKeepsShallowNodesRenumbered) {
  // 5 -> 6 -> 7, and 8 -> 9 under the root.
  Candidates c = Make({5, 6, 7, 8, 9}, {-1, 0, 1, -1, 3});
  EXPECT_EQ(c.size(), 5);
  EXPECT_EQ(c.depth(), 3);
  c.TruncateDepth(3);
  EXPECT_EQ(c.size(), 5);
  c.TruncateDepth(2);
  EXPECT_THAT(Tokens(c), ElementsAre(5, 6, 8, 9));
  EXPECT_THAT(c.parents, ElementsAre(-1, 0, -1, 2));
  EXPECT_EQ(c.depth(), 2);
  c.TruncateDepth(1);
  EXPECT_THAT(Tokens(c), ElementsAre(5, 8));
  EXPECT_THAT(c.parents, ElementsAre(-1, -1));
}

TEST(CandidatesTest, ComputedOnlyNodesDoNotCountAndGoFirstOnTruncation) {
  // Acceptable: 1 -> 2; computed only: a chain of three from the root.
  Candidates c = Make({1, 2, 7, 8, 9}, {-1, 0, -1, 2, 3});
  c.acceptable = 2;
  EXPECT_EQ(c.depth(), 2);
  EXPECT_EQ(c.size(), 5);
  c.TruncateDepth(2);  // The window is deeper than 2: it goes, the trie stays.
  EXPECT_THAT(Tokens(c), ElementsAre(1, 2));
  EXPECT_EQ(c.acceptable, -1);
  c = Make({1, 7}, {-1, -1});
  c.acceptable = 0;
  EXPECT_EQ(c.depth(), 0);
  c.TruncateDepth(5);  // Nothing deeper: unchanged.
  EXPECT_EQ(c.size(), 2);
  EXPECT_EQ(c.acceptable, 0);
}

}  // namespace
}  // namespace tandem::coordinator
