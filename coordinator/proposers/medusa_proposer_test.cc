// The Medusa proposer's coordinator half: a target-leader tree proposer whose candidates
// are what the leader returned with the verify, its tree size per request, and its
// place in the registry (served only when the leader serves it, never in AUTO).
#include "coordinator/proposers/medusa_proposer.h"

#include <gtest/gtest.h>

#include "coordinator/proposers/test_util.h"

namespace tandem::coordinator {
namespace {

std::unique_ptr<Sequence> MedusaSequence(std::optional<int> fixed_k) {
  ValidatedRequest r;
  r.speculation.method = v1::SPECULATION_METHOD_MEDUSA;
  r.speculation.fixed_k = fixed_k;
  return testing::MakeSequence(1, r, {1, 5, 6, 7}, 32);
}

TEST(MedusaProposerTest, CandidatesAreTheTreeTheLeaderReturned) {
  auto s = MedusaSequence(std::nullopt);
  ASSERT_EQ(s->chain_size(), 1);
  const Proposer& p = s->proposer(0);
  EXPECT_EQ(p.capabilities().site, ProposerSite::kTargetLeader);
  EXPECT_TRUE(p.capabilities().makes_trees);
  EXPECT_TRUE(p.capabilities().needs_hidden_state);
  EXPECT_TRUE(p.Propose(*s, s->proposer_state(0), 4, 8).empty());  // Nothing of its own.

  v1::VerifiedSequence result;
  result.add_committed(9);
  EXPECT_FALSE(p.OnVerified(*s, s->proposer_state(0), {}, result, 1).has_value());
  v1::NextCandidates* next = result.mutable_next_candidates();
  next->set_method(v1::SPECULATION_METHOD_MEDUSA);
  for (int32_t t : {11, 12, 13}) *next->add_proposals() = PointMassProposal(t);
  for (int32_t parent : {-1, -1, 0}) next->add_parents(parent);
  std::optional<Candidates> c = p.OnVerified(*s, s->proposer_state(0), {}, result, 1);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->method, v1::SPECULATION_METHOD_MEDUSA);
  EXPECT_EQ(c->site, ProposerSite::kTargetLeader);
  ASSERT_EQ(c->size(), 3);
  EXPECT_EQ(c->tokens[2].token(), 13);
  EXPECT_EQ(c->parents, (std::vector<int32_t>{-1, -1, 0}));
  EXPECT_EQ(c->depth(), 2);
  next->set_method(v1::SPECULATION_METHOD_LOOKAHEAD);  // Another method's: not ours.
  EXPECT_FALSE(p.OnVerified(*s, s->proposer_state(0), {}, result, 1).has_value());
}

TEST(MedusaProposerTest, TreeSizeIsTheDefaultOrTheRequestsFixedKWithinMaxK) {
  PlannerOptions o;
  o.max_k = 12;
  auto adaptive = MedusaSequence(std::nullopt);
  EXPECT_EQ(adaptive->proposer(0).MaxK(*adaptive, o), kDefaultMedusaNodes);
  EXPECT_EQ(MedusaProposer(9).MaxK(*adaptive, o), 9);
  EXPECT_EQ(MedusaProposer(30).MaxK(*adaptive, o), 12);
  auto fixed = MedusaSequence(5);
  EXPECT_EQ(fixed->proposer(0).MaxK(*fixed, o), 5);
  auto over = MedusaSequence(40);
  EXPECT_EQ(over->proposer(0).MaxK(*over, o), 12);
}

TEST(MedusaProposerTest, ServedOnlyWhenTheLeaderServesItAndNotInAuto) {
  ProposerConfig config;
  config.draft_worker = true;
  ProposerRegistry without(config);
  EXPECT_TRUE(without.ChainFor(v1::SPECULATION_METHOD_MEDUSA).empty());
  config.draft_worker = false;
  config.target_methods = {v1::SPECULATION_METHOD_MEDUSA};
  ProposerRegistry with(config);
  EXPECT_EQ(with.served_methods(),
            (std::vector<v1::SpeculationMethod>{v1::SPECULATION_METHOD_MEDUSA,
                                                v1::SPECULATION_METHOD_PROMPT_LOOKUP,
                                                v1::SPECULATION_METHOD_LOOKAHEAD}));
  ASSERT_EQ(with.ChainFor(v1::SPECULATION_METHOD_MEDUSA).size(), 1u);
  for (const Proposer* p : with.ChainFor(v1::SPECULATION_METHOD_AUTO)) {
    EXPECT_NE(p->method(), v1::SPECULATION_METHOD_MEDUSA);
  }
}

}  // namespace
}  // namespace tandem::coordinator
