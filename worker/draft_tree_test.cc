// Dynamic draft trees: the expansion on hand-made distributions, and the draft engine's
// trees against a brute-force reference that decodes every path prefix on its own
// model, across batch compositions, leaving only the committed tokens cached.
#include "worker/draft_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "kernels/accept/draft_sample.h"
#include "worker/draft_engine.h"
#include "worker/draft_engine_test_fixture.h"
#include "worker/sequence_sampling.h"
#include "worker/test_util.h"

namespace tandem {
namespace worker {
namespace {

using testing::Greedy;
using testing::Sampled;

constexpr int kVocab = 1000;  // kWideVocabCheckpoint.

spec::SparseDistribution Top(std::vector<int32_t> ids, std::vector<float> probs) {
  return {std::move(ids), std::move(probs)};
}

// Width 2: the root's children a (0.6), b (0.3); a's children (0.5, 0.4) have path
// 0.30 (a tie with b, which was made first), 0.24; b's (0.9, 0.1) 0.27, 0.03. The depth-2
// frontier is a1 and b1; depth 3 stops there (max_depth 3). Budget 5 keeps a, b, a1,
// b1, a2.
TEST(DraftTreeBuilderTest, ExpandsTheBestFrontierAndKeepsTheBestNodes) {
  DraftTreeBuilder tree(/*width=*/2, /*max_depth=*/3, /*budget=*/5);
  ASSERT_TRUE(tree.NeedsDistributions());
  tree.Grow({Top({10, 20, 30}, {0.6f, 0.3f, 0.1f})});  // Width 2: 30 is ignored.
  ASSERT_EQ(tree.frontier_size(), 2);
  EXPECT_EQ(tree.FrontierNode(0).token, 10);
  EXPECT_EQ(tree.FrontierNode(0).depth, 1);
  EXPECT_EQ(tree.FrontierNode(0).parent_slot, -1);
  EXPECT_EQ(tree.FrontierNode(1).token, 20);
  tree.Grow({Top({11, 12}, {0.5f, 0.4f}), Top({21, 22}, {0.9f, 0.1f})});
  ASSERT_EQ(tree.frontier_size(), 2);
  EXPECT_EQ(tree.FrontierPath(0), (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(tree.FrontierPath(1), (std::vector<int32_t>{20, 21}));
  // Each frontier node names its parent's slot in the previous frontier.
  EXPECT_EQ(tree.FrontierNode(0).depth, 2);
  EXPECT_EQ(tree.FrontierNode(0).parent_slot, 0);
  EXPECT_EQ(tree.FrontierNode(1).token, 21);
  EXPECT_EQ(tree.FrontierNode(1).parent_slot, 1);
  tree.Grow({Top({13}, {0.1f}), Top({23}, {0.1f})});
  EXPECT_FALSE(tree.NeedsDistributions());  // Depth 3 reached.
  const std::vector<DraftTreeNode> result = tree.Result();
  ASSERT_EQ(result.size(), 5u);
  const std::vector<int32_t> tokens = {10, 20, 11, 21, 12};  // 0.6, 0.3, 0.3, 0.27, 0.24.
  const std::vector<int> parents = {-1, -1, 0, 1, 0};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(result[i].token, tokens[i]) << i;
    EXPECT_EQ(result[i].parent, parents[i]) << i;
  }
  EXPECT_EQ(result[2].path_probability, double{0.6f} * double{0.5f});
}

// Ties rank the node made first; growth stops once the frontier cannot beat the
// budget-th node; zero-probability tokens make no node.
// Under the coupled rule the draft's own sample leads, taking the top probability; the
// other tokens follow in order, one dropping out when the sample was not among them.
TEST(DraftTreeBuilderTest, CoupledChildrenPutTheCoupledSampleFirst) {
  const spec::SparseDistribution top = {{5, 6, 7}, {0.5f, 0.3f, 0.1f}};
  const spec::SparseDistribution same = CoupledChildren(5, top);
  EXPECT_EQ(same.ids, top.ids);
  EXPECT_EQ(same.probs, top.probs);
  const spec::SparseDistribution inside = CoupledChildren(7, top);
  EXPECT_EQ(inside.ids, (std::vector<int32_t>{7, 5, 6}));
  EXPECT_EQ(inside.probs, top.probs);
  const spec::SparseDistribution outside = CoupledChildren(9, top);
  EXPECT_EQ(outside.ids, (std::vector<int32_t>{9, 5, 6}));
  EXPECT_EQ(outside.probs, top.probs);
  EXPECT_TRUE(CoupledChildren(9, {}).ids.empty());
}

TEST(DraftTreeBuilderTest, TiesAndEarlyStop) {
  DraftTreeBuilder tree(/*width=*/2, /*max_depth=*/8, /*budget=*/3);
  tree.Grow({Top({5, 6}, {0.5f, 0.5f})});
  ASSERT_TRUE(tree.NeedsDistributions());
  tree.Grow({Top({7, 8}, {1.0f, 0.0f}), Top({9}, {0.2f})});
  // Nodes 5, 6 (0.5 each), 7 (0.5, after them), 9 (0.1): the frontier's best (7) is
  // the third-best node, so nothing deeper can enter the budget.
  EXPECT_FALSE(tree.NeedsDistributions());
  const std::vector<DraftTreeNode> result = tree.Result();
  ASSERT_EQ(result.size(), 3u);
  EXPECT_EQ(result[0].token, 5);
  EXPECT_EQ(result[1].token, 6);
  EXPECT_EQ(result[2].token, 7);
  EXPECT_EQ(result[2].parent, 0);
}

// Dynamic trees on the draft engine fixture (draft_engine_test_fixture.h).
class DraftEngineTreeTest : public DraftEngineFixture {
 protected:
  // A draft of the whole prompt (nothing cached) for sequence `id`.
  static v1::DraftSequence Seq(uint64_t id, const std::vector<int32_t>& prompt, int k,
                               const v1::SequenceSampling& sampling, int nodes, int width) {
    v1::DraftSequence s;
    s.set_sequence_id(id);
    s.mutable_tokens()->Assign(prompt.begin(), prompt.end());
    s.set_num_draft_tokens(k);
    *s.mutable_sampling() = sampling;
    s.set_tree_nodes(nodes);
    s.set_tree_width(width);
    return s;
  }

  // The draft's top `width` tokens after `context`, decoded one token per call on the
  // reference model (a fresh sequence each time).
  spec::SparseDistribution ReferenceTop(const std::vector<int32_t>& context,
                                        const v1::SequenceSampling& sampling, int width) {
    const std::vector<std::vector<float>> logits =
        testing::DecodeLogits(*reference_.model, context, ++reference_id_);
    DraftRow row;
    row.sampling = ToSamplingConfig(sampling);
    row.q_size = 1;
    row.coupled = sampling.rule() == v1::ACCEPTANCE_RULE_COUPLED;
    row.seed = sampling.seed();
    row.position = context.size();  // The position of the token after `context`.
    row.top = width;
    std::vector<DraftProposal> proposals;
    EXPECT_TRUE(HostSampleDrafts(logits.back(), kVocab, {row}, &proposals).ok());
    const DraftProposal& p = proposals.at(0);
    return row.coupled ? CoupledChildren(p.token, p.top) : p.top;
  }

  // Brute force: every node of every depth is a path; a depth's frontier is its best
  // `width` paths (sorted anew here); children from ReferenceTop; the best `nodes`
  // paths overall are returned as {path -> path probability}, with their ranking.
  std::vector<std::pair<std::vector<int32_t>, double>> ReferenceTree(
      const std::vector<int32_t>& prompt, const v1::SequenceSampling& sampling, int k, int nodes,
      int width) {
    std::vector<std::pair<std::vector<int32_t>, double>> all;  // Creation order.
    std::vector<std::pair<std::vector<int32_t>, double>> frontier = {{{}, 1.0}};
    for (int depth = 1; depth <= k && !frontier.empty(); ++depth) {
      std::vector<std::pair<std::vector<int32_t>, double>> made;
      for (const auto& [path, probability] : frontier) {
        std::vector<int32_t> context = prompt;
        context.insert(context.end(), path.begin(), path.end());
        const spec::SparseDistribution top = ReferenceTop(context, sampling, width);
        for (size_t c = 0; c < top.ids.size(); ++c) {
          std::vector<int32_t> child = path;
          child.push_back(top.ids[c]);
          made.push_back({child, probability * top.probs[c]});
        }
      }
      all.insert(all.end(), made.begin(), made.end());
      std::stable_sort(made.begin(), made.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });
      made.resize(std::min<size_t>(made.size(), width));
      // Frontier in creation order, as children are made in that order.
      std::vector<std::pair<std::vector<int32_t>, double>> next;
      for (const auto& node : all) {
        if (std::find(made.begin(), made.end(), node) != made.end()) next.push_back(node);
      }
      frontier = std::move(next);
    }
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    all.resize(std::min<size_t>(all.size(), nodes));
    return all;
  }

  uint64_t reference_id_ = 1000;
};

// The path from the root to node i of a drafted tree.
std::vector<int32_t> PathOf(const v1::DraftedSequence& d, int i) {
  std::vector<int32_t> path;
  for (int n = i; n >= 0; n = d.proposal_parents(n)) path.push_back(d.proposals(n).token());
  std::reverse(path.begin(), path.end());
  return path;
}

TEST_F(DraftEngineTreeTest, TreesEqualABruteForceExpansionAndRollBack) {
  const std::vector<int32_t> prompt = testing::Tokens(11, kVocab, 8);
  struct Shape {
    int k, nodes, width;
  };
  for (const v1::SequenceSampling& sampling :
       {Greedy(), Sampled(1.1f, 7, v1::ACCEPTANCE_RULE_COUPLED)}) {
    for (const Shape shape : {Shape{4, 8, 2}, Shape{3, 12, 3}}) {
      SCOPED_TRACE(::testing::Message() << "k " << shape.k << " width " << shape.width
                                        << " temperature " << sampling.temperature());
      v1::DraftRequest request;
      *request.add_sequences() = Seq(1, prompt, shape.k, sampling, shape.nodes, shape.width);
      auto drafted = engine_->Draft(request);
      ASSERT_TRUE(drafted.ok()) << drafted.status();
      const v1::DraftedSequence& d = drafted->sequences(0);
      // The sequence holds the prompt; no tree branch is left.
      EXPECT_EQ(d.cached_length(), prompt.size());
      EXPECT_EQ(*model_.executor->CachedLength(1), static_cast<int>(prompt.size()));
      EXPECT_EQ(model_.executor->kv_stats().num_sequences, 1);
      const auto expected = ReferenceTree(prompt, sampling, shape.k, shape.nodes, shape.width);
      ASSERT_EQ(d.proposals_size(), static_cast<int>(expected.size()));
      ASSERT_EQ(d.proposal_parents_size(), d.proposals_size());
      ASSERT_EQ(d.path_probs_size(), d.proposals_size());
      for (int i = 0; i < d.proposals_size(); ++i) {
        EXPECT_LT(d.proposal_parents(i), i);
        EXPECT_EQ(PathOf(d, i), expected[i].first) << "node " << i;
        EXPECT_EQ(d.path_probs(i), static_cast<float>(expected[i].second)) << "node " << i;
        EXPECT_EQ(d.proposals(i).q_ids_size(), 1);
      }
      // The tree goes deeper than the root's children.
      EXPECT_GT(*std::max_element(d.proposal_parents().begin(), d.proposal_parents().end()), -1);
      ASSERT_TRUE(model_.executor->Release(1).ok());
    }
  }
}

// The same prefix proposes the same tree alone or batched with a chain and another
// tree, and a chain drafted after a tree equals one drafted on a fresh cache.
TEST_F(DraftEngineTreeTest, TreesDoNotDependOnTheBatch) {
  const std::vector<int32_t> prompt = testing::Tokens(9, kVocab, 2);
  const std::vector<int32_t> other = testing::Tokens(14, kVocab, 5);
  v1::DraftRequest alone;
  *alone.add_sequences() = Seq(1, prompt, 4, Greedy(), 10, 3);
  auto a = engine_->Draft(alone);
  ASSERT_TRUE(a.ok()) << a.status();
  v1::DraftRequest mixed;
  *mixed.add_sequences() = Seq(2, other, 5, Greedy(), 0, 0);  // A chain.
  *mixed.add_sequences() = Seq(3, prompt, 4, Greedy(), 10, 3);
  *mixed.add_sequences() = Seq(4, other, 3, Greedy(), 6, 2);
  auto m = engine_->Draft(mixed);
  ASSERT_TRUE(m.ok()) << m.status();
  const v1::DraftedSequence& x = a->sequences(0);
  const v1::DraftedSequence& y = m->sequences(1);
  ASSERT_EQ(x.proposals_size(), y.proposals_size());
  for (int i = 0; i < x.proposals_size(); ++i) {
    EXPECT_EQ(x.proposals(i).token(), y.proposals(i).token()) << i;
    EXPECT_EQ(x.proposal_parents(i), y.proposal_parents(i)) << i;
    EXPECT_EQ(x.path_probs(i), y.path_probs(i)) << i;
  }
  EXPECT_EQ(m->sequences(0).cached_length(), other.size() + 4);  // The chain as before.
  EXPECT_EQ(m->sequences(2).cached_length(), other.size());
  // Sequence 1 drafts a chain next; sequence 5 drafts it on a fresh cache.
  v1::DraftSequence chain = Seq(1, {prompt.back()}, 4, Greedy(), 0, 0);
  chain.set_start_position(prompt.size() - 1);
  v1::DraftRequest after;
  *after.add_sequences() = chain;
  *after.add_sequences() = Seq(5, prompt, 4, Greedy(), 0, 0);
  auto c = engine_->Draft(after);
  ASSERT_TRUE(c.ok()) << c.status();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(c->sequences(0).proposals(i).token(), c->sequences(1).proposals(i).token()) << i;
  }
  // The greedy chain is the tree's first path.
  EXPECT_EQ(c->sequences(0).proposals(0).token(), x.proposals(0).token());
}

}  // namespace
}  // namespace worker
}  // namespace tandem
