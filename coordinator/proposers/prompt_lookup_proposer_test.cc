// Prompt lookup as a proposer: proposals from the sequence's own context, an index
// kept in step with committed tokens; chains by default, trees with several branches.
#include "coordinator/proposers/prompt_lookup_proposer.h"

#include <gtest/gtest.h>

#include <vector>

#include "coordinator/proposers/test_util.h"
#include "spec/tree_acceptance.h"

namespace tandem::coordinator {
namespace {

constexpr size_t kVocab = 2048;

std::unique_ptr<Sequence> LookupSequence(std::vector<int32_t> prompt) {
  ValidatedRequest r;
  r.speculation.method = v1::SPECULATION_METHOD_PROMPT_LOOKUP;
  return testing::MakeSequence(1, r, std::move(prompt), 32);
}

// The tree as the worker checks it under the strictest rule (rejection reads every q).
absl::Status ValidateOnWorker(const Candidates& c) {
  std::vector<spec::Proposal> nodes;
  for (const v1::ProposedToken& t : c.tokens) {
    spec::Proposal p;
    p.token = t.token();
    p.q.ids.assign(t.q_ids().begin(), t.q_ids().end());
    p.q.probs.assign(t.q_probs().begin(), t.q_probs().end());
    nodes.push_back(p);
  }
  return spec::ValidateTreeProposals(c.parents, nodes, kVocab, spec::AcceptanceRule::kRejection);
}

TEST(PromptLookupProposerTest, ProposesWhatFollowedTheLastNgram) {
  auto s = LookupSequence({5, 6, 7, 8, 9, 5, 6});
  PromptLookupProposer p;
  EXPECT_FALSE(p.capabilities().makes_trees);
  Candidates c = p.Propose(*s, s->proposer_state(0), 3, 3);
  ASSERT_EQ(c.size(), 3);
  EXPECT_EQ(c.method, v1::SPECULATION_METHOD_PROMPT_LOOKUP);
  EXPECT_EQ(c.site, ProposerSite::kCoordinator);
  EXPECT_EQ(c.tokens[0].token(), 7);
  EXPECT_EQ(c.tokens[2].token(), 9);
  EXPECT_TRUE(c.parents.empty());
  EXPECT_FLOAT_EQ(c.tokens[0].q_probs(0), 1.0f);
}

TEST(PromptLookupProposerTest, SeveralContinuationsMakeAValidTree) {
  // "5 6" was followed by 7 8 9 and, more recently, by 7 4 3.
  auto s = LookupSequence({5, 6, 7, 8, 9, 5, 6, 7, 4, 3, 5, 6});
  PromptLookupProposer p(/*max_branches=*/2);
  EXPECT_TRUE(p.capabilities().makes_trees);
  std::unique_ptr<ProposerState> state = p.NewState(*s);
  const Candidates c = p.Propose(*s, *state, 3, 16);
  ASSERT_EQ(c.size(), 5);  // 7 4 3 and 8 9 under the shared 7.
  EXPECT_EQ(c.parents, (std::vector<int32_t>{-1, 0, 1, 0, 3}));
  EXPECT_EQ(c.depth(), 3);
  const absl::Status valid = ValidateOnWorker(c);
  EXPECT_TRUE(valid.ok()) << valid;
  // The node budget caps the tree; a budget of K leaves the latest chain.
  const Candidates capped = p.Propose(*s, *state, 3, 4);
  EXPECT_EQ(capped.size(), 4);
  EXPECT_TRUE(ValidateOnWorker(capped).ok());
  const Candidates chain = p.Propose(*s, *state, 3, 3);
  EXPECT_EQ(chain.size(), 3);
  EXPECT_TRUE(chain.parents.empty());  // A single path goes as a chain.
  EXPECT_EQ(chain.tokens[1].token(), 4);
}

TEST(PromptLookupProposerTest, TreesFollowCommittedTokens) {
  auto before = LookupSequence({5, 6, 7, 8, 9, 5, 6, 7, 4, 3, 5});
  PromptLookupProposer p(2);
  std::unique_ptr<ProposerState> state = p.NewState(*before);
  // The step committed 6: the sequence's tokens as OnVerified sees them.
  auto after = LookupSequence({5, 6, 7, 8, 9, 5, 6, 7, 4, 3, 5, 6});
  v1::VerifiedSequence result;
  result.add_committed(6);
  p.OnVerified(*after, *state, Candidates(), result, 1);
  const Candidates c = p.Propose(*after, *state, 2, 8);
  EXPECT_EQ(c.size(), 3);  // 7 4 and 8 under 7.
  EXPECT_TRUE(ValidateOnWorker(c).ok());
}

}  // namespace
}  // namespace tandem::coordinator
