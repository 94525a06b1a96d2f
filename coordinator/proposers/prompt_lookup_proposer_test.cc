// Prompt lookup as a proposer: proposals from the sequence's own context, an index
// kept in step with committed tokens.
#include "coordinator/proposers/prompt_lookup_proposer.h"

#include <gtest/gtest.h>

#include "coordinator/proposers/test_util.h"

namespace tandem::coordinator {
namespace {

TEST(PromptLookupProposerTest, ProposesWhatFollowedTheLastNgram) {
  ValidatedRequest r;
  r.speculation.method = v1::SPECULATION_METHOD_PROMPT_LOOKUP;
  auto s = testing::MakeSequence(1, r, {5, 6, 7, 8, 9, 5, 6}, 32);
  PromptLookupProposer p;
  const int slot = testing::SlotOf(*s, p.method());
  ASSERT_GE(slot, 0);
  Candidates c = p.Propose(*s, s->proposer_state(slot), 3);
  ASSERT_EQ(c.size(), 3);
  EXPECT_EQ(c.method, v1::SPECULATION_METHOD_PROMPT_LOOKUP);
  EXPECT_EQ(c.site, ProposerSite::kCoordinator);
  EXPECT_EQ(c.tokens[0].token(), 7);
  EXPECT_EQ(c.tokens[2].token(), 9);
  EXPECT_FLOAT_EQ(c.tokens[0].q_probs(0), 1.0f);
}

}  // namespace
}  // namespace tandem::coordinator
