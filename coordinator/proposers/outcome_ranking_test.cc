#include "coordinator/proposers/outcome_ranking.h"

#include <gtest/gtest.h>

#include <cmath>

#include "coordinator/proposers/candidates.h"

namespace tandem::coordinator {
namespace {

v1::ProposedToken Proposal(int32_t token) { return PointMassProposal(token); }

v1::TopTokens Top(std::vector<std::pair<int32_t, float>> entries) {
  v1::TopTokens t;
  for (auto [id, p] : entries) {
    t.add_ids(id);
    t.add_probs(p);
  }
  return t;
}

// Worked by hand: d = (10, 20), a = (0.8, 0.5).
//   (0, 11): 0.15; (0, 12): 0.05; (1, 21): 0.8 * 0.3 = 0.24; (1, 22): 0.8 * 0.2 = 0.16;
//   (2, guess): 0.8 * 0.5 * mean(0.8, 0.5) = 0.26.
TEST(RankOutcomesTest, ProductsOfConfidencesTimesTheRejectedPositionsTokens) {
  const std::vector<v1::ProposedToken> d = {Proposal(10), Proposal(20)};
  const std::vector<v1::TopTokens> top = {Top({{10, 0.8f}, {11, 0.15f}, {12, 0.05f}}),
                                          Top({{20, 0.5f}, {21, 0.3f}, {22, 0.2f}})};
  const std::vector<StepOutcome> all = RankOutcomes(d, top, 10);
  ASSERT_EQ(all.size(), 5u);
  const std::pair<int, int32_t> order[] = {{2, -1}, {1, 21}, {1, 22}, {0, 11}, {0, 12}};
  const double probs[] = {0.26, 0.24, 0.16, 0.15, 0.05};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(all[i].accepted, order[i].first) << i;
    EXPECT_EQ(all[i].token, order[i].second) << i;
    EXPECT_NEAR(all[i].probability, probs[i], 1e-6) << i;
  }
  const std::vector<StepOutcome> two = RankOutcomes(d, top, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].token, 21);
}

// Without top tokens (a proposer that did not ask) only the all-accepted outcome is
// offered, with the confidences read from q.
TEST(RankOutcomesTest, WithoutTopTokensOnlyTheAllAcceptedOutcome) {
  v1::ProposedToken sampled;
  sampled.set_token(7);
  sampled.add_q_ids(7);
  sampled.add_q_probs(0.6f);
  sampled.add_q_ids(8);
  sampled.add_q_probs(0.4f);
  const std::vector<StepOutcome> out = RankOutcomes({sampled, Proposal(9)}, {}, 4);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].accepted, 2);
  EXPECT_NEAR(out[0].probability, 0.6 * 1.0 * 0.8, 1e-6);
  EXPECT_TRUE(RankOutcomes({}, {}, 4).empty());
  EXPECT_TRUE(RankOutcomes({Proposal(1)}, {}, 0).empty());
}

// Ties: fewer accepted first, then the lower token; the proposal itself and tokens of
// zero probability are never outcomes.
TEST(RankOutcomesTest, TiesAndExclusions) {
  const std::vector<v1::ProposedToken> d = {Proposal(5)};
  const std::vector<v1::TopTokens> top = {Top({{5, 0.5f}, {9, 0.25f}, {3, 0.25f}, {4, 0.0f}})};
  const std::vector<StepOutcome> out = RankOutcomes(d, top, 10);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].token, 3);
  EXPECT_EQ(out[1].token, 9);
  EXPECT_EQ(out[2].accepted, 1);  // 0.5 * 0.5 = 0.25: ties with them, more accepted last.
}

}  // namespace
}  // namespace tandem::coordinator
