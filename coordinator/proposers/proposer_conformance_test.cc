// The contract every served proposer passes (as every communicator passes the
// communicator conformance suite): a new method is added to the registry and gets
// these checks for free.
//  * candidates are valid proposals (worker-side validation), of depth at most K and
//    within the node budget, labelled with the proposer's method and site;
//  * determinism: the same sequence state gives the same candidates;
//  * bookkeeping: after a verify that corrects the candidates, the next candidates are
//    for the new context (a draft-worker proposer feeds the correction, nothing
//    already cached twice); after Reset it rebuilds from the start.
// Draft-worker proposers are driven with a deterministic fake answer (token = last fed
// token + i + 1), as the engine would deliver a real one; target-leader proposers with
// a plain verify result.
#include <gtest/gtest.h>

#include "coordinator/proposers/registry.h"
#include "coordinator/proposers/test_util.h"
#include "worker/request_validation.h"

namespace tandem::coordinator {
namespace {

constexpr int kVocab = 2048;

// Candidates of `s` from the proposer at `slot`, as the planner and engine obtain them.
Candidates Obtain(Sequence* s, int slot, int k, PhasePlan* plan_out = nullptr) {
  const Proposer& p = s->proposer(slot);
  switch (p.capabilities().site) {
    case ProposerSite::kCoordinator:
      return p.Propose(*s, s->proposer_state(slot), k, 2 * k);
    case ProposerSite::kDraftWorker: {
      PlannerOptions o;
      DraftBudget budget{0, 512};
      PhasePlan plan;
      p.AddWork(s, s->proposer_state(slot), slot, k, false, o, &budget, &plan);
      EXPECT_EQ(plan.draft.sequences_size(), 1);
      if (plan.draft.sequences_size() != 1) return {};
      const v1::DraftSequence& req = plan.draft.sequences(0);
      EXPECT_EQ(plan.draft_slots, std::vector<int>{slot});
      EXPECT_EQ(req.num_draft_tokens(), static_cast<uint32_t>(k));
      v1::DraftedSequence answer;
      for (int i = 0; i < k; ++i) {
        *answer.add_proposals() =
            PointMassProposal((req.tokens(req.tokens_size() - 1) + i + 1) % kVocab);
      }
      if (plan_out != nullptr) *plan_out = plan;
      return p.OnDrafted(*s, s->proposer_state(slot), req, answer, false).value_or(Candidates());
    }
    case ProposerSite::kTargetLeader: {
      // As the engine: the candidates come with a verify result, before any K is
      // chosen. What the worker half returns after a plain step: Lookahead's (its
      // window's outputs) is empty before its first window; Medusa's, a tree of at most
      // k nodes of depth <= k.
      v1::VerifiedSequence result;
      v1::NextCandidates* next = result.mutable_next_candidates();
      next->set_method(p.method());
      for (int i = 0; i < k && p.method() != v1::SPECULATION_METHOD_LOOKAHEAD; ++i) {
        *next->add_proposals() = PointMassProposal((s->tokens().back() + i + 1) % kVocab);
        next->add_parents(i == 0 ? -1 : (i + 1) / 2 - 1);
      }
      return p.OnVerified(*s, s->proposer_state(slot), {}, result, 0).value_or(Candidates());
    }
  }
  return {};
}

// The most depth (or nodes) candidates obtained for K = `k` may have: K (nodes: 2K, the
// budget Obtain gives); a target-leader proposer's come before K is chosen, within
// its MaxK.
int Cap(const Sequence& s, int slot, int k, bool nodes) {
  const Proposer& p = s.proposer(slot);
  if (p.capabilities().site == ProposerSite::kTargetLeader) return p.MaxK(s, PlannerOptions());
  return nodes ? 2 * k : k;
}

std::unique_ptr<Sequence> SequenceFor(v1::SpeculationMethod method) {
  ValidatedRequest r;
  r.speculation.method = method;
  r.speculation.fixed_k = 4;
  r.speculation.lookahead = {.window = 2, .ngram = 3, .max_guesses = 2};  // 8 nodes.
  // A context with repeats so that n-gram proposers find matches.
  return testing::MakeSequence(1, r, {1, 40, 41, 42, 43, 44, 40, 41}, 64);
}

class ProposerConformanceTest : public ::testing::TestWithParam<v1::SpeculationMethod> {};

TEST_P(ProposerConformanceTest, CandidatesAreValidAndLabelled) {
  auto s = SequenceFor(GetParam());
  ASSERT_EQ(s->chain_size(), 1);
  const Proposer& p = s->proposer(0);
  EXPECT_EQ(p.method(), GetParam());
  for (int k : {1, 3, 4}) {
    auto fresh = SequenceFor(GetParam());
    Candidates c = Obtain(fresh.get(), 0, k);
    EXPECT_LE(c.depth(), Cap(*fresh, 0, k, false));
    EXPECT_LE(c.size(), Cap(*fresh, 0, k, true));
    if (c.empty()) continue;
    EXPECT_EQ(c.method, p.method());
    EXPECT_EQ(c.site, p.capabilities().site);
    if (!p.capabilities().makes_trees) {
      EXPECT_TRUE(c.parents.empty());
    }
    if (!p.capabilities().explicit_positions) {
      EXPECT_TRUE(c.positions.empty());
    }
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      absl::Status valid =
          worker::ValidateProposal(c.tokens[i], kVocab, "candidate " + std::to_string(i));
      EXPECT_TRUE(valid.ok()) << valid;
    }
  }
}

TEST_P(ProposerConformanceTest, DeterministicForTheSameState) {
  auto a = SequenceFor(GetParam());
  auto b = SequenceFor(GetParam());
  Candidates ca = Obtain(a.get(), 0, 4), cb = Obtain(b.get(), 0, 4);
  ASSERT_EQ(ca.size(), cb.size());
  for (int i = 0; i < ca.size(); ++i) EXPECT_EQ(ca.tokens[i].token(), cb.tokens[i].token());
}

TEST_P(ProposerConformanceTest, FollowsVerifiedTokensAndRebuildsAfterReset) {
  auto t = Tokenizer::Load("models/target");
  ASSERT_TRUE(t.ok()) << t.status();
  ValidatedRequest r;
  r.speculation.method = GetParam();
  r.speculation.fixed_k = 4;
  r.speculation.lookahead = {.window = 2, .ngram = 3, .max_guesses = 2};
  auto s = testing::MakeSequence(1, r, {1, 40, 41, 42, 43, 44, 40, 41}, 64, &*t);
  s->candidates = Obtain(s.get(), 0, 4);
  // The target rejects every candidate and commits 45 instead.
  v1::VerifiedSequence result;
  result.add_committed(45);
  result.set_cached_length(8);
  s->OnVerified(result, s->candidates.size(), absl::Now());
  ASSERT_EQ(s->tokens().back(), 45);
  PhasePlan plan;
  Candidates next = s->candidates.empty() ? Obtain(s.get(), 0, 4, &plan) : s->candidates;
  EXPECT_LE(next.size(), Cap(*s, 0, 4, false));
  if (plan.draft.sequences_size() == 1) {
    const v1::DraftSequence& req = plan.draft.sequences(0);
    EXPECT_EQ(req.tokens(req.tokens_size() - 1), 45);  // The correction is fed.
    EXPECT_EQ(req.start_position() + req.tokens_size(), s->tokens().size());
    EXPECT_GE(req.start_position(), 8u);  // Nothing cached is fed again.
  }
  s->proposer(0).Reset(*s, s->proposer_state(0));
  plan = PhasePlan();
  s->candidates.Clear();
  Candidates rebuilt = Obtain(s.get(), 0, 4, &plan);
  EXPECT_LE(rebuilt.size(), Cap(*s, 0, 4, false));
  if (plan.draft.sequences_size() == 1) {
    EXPECT_EQ(plan.draft.sequences(0).start_position(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryServedProposer, ProposerConformanceTest,
                         ::testing::ValuesIn(testing::TestRegistry().served_methods()),
                         [](const ::testing::TestParamInfo<v1::SpeculationMethod>& info) {
                           return v1::SpeculationMethod_Name(info.param);
                         });

}  // namespace
}  // namespace tandem::coordinator
