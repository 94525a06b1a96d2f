// Pruning a drafted dynamic tree by node value: the draft's chain (first children) is
// kept base_nodes deep, other nodes while their path probability exceeds the price of a
// verify row and their parent is kept; malformed answers never yield a malformed tree.
#include "coordinator/proposers/draft_tree_pruning.h"

#include <gtest/gtest.h>

#include <vector>

namespace tandem::coordinator {
namespace {

struct Node {
  int32_t token;
  int32_t parent;
  float path;
};

v1::DraftedSequence Drafted(const std::vector<Node>& nodes) {
  v1::DraftedSequence d;
  for (const Node& n : nodes) {
    *d.add_proposals() = PointMassProposal(n.token);
    d.add_proposal_parents(n.parent);
    d.add_path_probs(n.path);
  }
  return d;
}

std::vector<int32_t> Tokens(const Candidates& c) {
  std::vector<int32_t> tokens;
  for (const v1::ProposedToken& t : c.tokens) tokens.push_back(t.token());
  return tokens;
}

// a 0.8, b 0.15 (beside a), a1 0.6, a2 0.12, a11 0.4, b1 0.1 (under b).
const std::vector<Node> kTree = {{10, -1, 0.8f},  {11, 0, 0.6f},  {12, 1, 0.4f},
                                 {20, -1, 0.15f}, {13, 0, 0.12f}, {21, 3, 0.1f}};

TEST(DraftTreePruningTest, KeepsTheChainAndTheNodesWorthTheirRow) {
  struct Case {
    int base;
    double min_value;
    std::vector<int32_t> tokens, parents;
  };
  const Case cases[] = {
      {3, 0.5, {10, 11, 12}, {-1, 0, 1}},  // Only the base (the controller's K).
      {3, 0.13, {10, 11, 12, 20}, {-1, 0, 1, -1}},
      {3, 0.11, {10, 11, 12, 20, 13}, {-1, 0, 1, -1, 0}},
      {3, 0.0, {10, 11, 12, 20, 13, 21}, {-1, 0, 1, -1, 0, 3}},
      {1, 0.5, {10, 11}, {-1, 0}},
      {0, 1.0, {}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.tokens));
    Candidates got;
    PruneDraftTree(Drafted(kTree), c.base, c.min_value, &got);
    EXPECT_EQ(Tokens(got), c.tokens);
    EXPECT_EQ(got.parents, c.parents);
  }
}

// The chain is kept even where a sibling is worth more than its deeper nodes.
TEST(DraftTreePruningTest, TheChainIsKeptBeforeMoreValuableSiblings) {
  Candidates got;
  PruneDraftTree(
      Drafted({{10, -1, 0.5f}, {20, -1, 0.4f}, {11, 0, 0.3f}, {21, 1, 0.35f}, {12, 2, 0.1f}}), 3,
      0.32, &got);
  EXPECT_EQ(Tokens(got), (std::vector<int32_t>{10, 20, 11, 21, 12}));
  PruneDraftTree(
      Drafted({{10, -1, 0.5f}, {20, -1, 0.4f}, {11, 0, 0.3f}, {21, 1, 0.35f}, {12, 2, 0.1f}}), 3,
      0.45, &got);
  EXPECT_EQ(Tokens(got), (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(got.parents, (std::vector<int32_t>{-1, 0, 1}));
}

// A node whose parent was pruned is pruned too (renumbered parents stay in range), a
// parent after its node ends the tree, and mismatched field sizes yield nothing.
TEST(DraftTreePruningTest, NeverReturnsAMalformedTree) {
  Candidates got;
  // Node 2's parent (node 1, 0.05) is under the price; node 2 claims more value.
  PruneDraftTree(Drafted({{10, -1, 0.9f}, {11, -1, 0.05f}, {12, 1, 0.5f}, {13, 0, 0.4f}}), 1, 0.1,
                 &got);
  EXPECT_EQ(Tokens(got), (std::vector<int32_t>{10, 13}));
  EXPECT_EQ(got.parents, (std::vector<int32_t>{-1, 0}));
  PruneDraftTree(Drafted({{10, -1, 0.9f}, {11, 2, 0.5f}, {12, -1, 0.4f}}), 3, 0, &got);
  EXPECT_EQ(Tokens(got), (std::vector<int32_t>{10}));
  v1::DraftedSequence mismatched = Drafted(kTree);
  mismatched.mutable_path_probs()->RemoveLast();
  PruneDraftTree(mismatched, 3, 0, &got);
  EXPECT_TRUE(got.empty());
}

}  // namespace
}  // namespace tandem::coordinator
