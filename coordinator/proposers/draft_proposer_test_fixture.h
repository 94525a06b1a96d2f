// The draft proposer's test fixture, shared by draft_proposer_test.cc (cache mirror,
// work, continuations) and draft_proposer_tree_test.cc (draft trees).
#ifndef TANDEM_COORDINATOR_PROPOSERS_DRAFT_PROPOSER_TEST_FIXTURE_H_
#define TANDEM_COORDINATOR_PROPOSERS_DRAFT_PROPOSER_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "coordinator/proposers/draft_proposer.h"
#include "coordinator/proposers/test_util.h"

namespace tandem::coordinator {

using testing::GiveDraftCandidates;
using testing::MakeSequence;
using testing::SlotOf;

// Both workers known, the draft worker up or down.
inline WorkerAvailability Workers(bool draft) {
  WorkerAvailability w;
  w.draft = draft;
  w.target = true;
  return w;
}

// A Draft answer of point-mass proposals `tokens`, each with the top tokens t (0.6),
// t + 100 (0.3) and t + 200 (0.1) when `with_top`.
inline v1::DraftedSequence DraftedWithTop(const std::vector<int32_t>& tokens,
                                          bool with_top = true) {
  v1::DraftedSequence d;
  for (int32_t t : tokens) {
    *d.add_proposals() = PointMassProposal(t);
    if (!with_top) continue;
    v1::TopTokens* top = d.add_top();
    for (auto [token, p] : {std::pair{t, 0.6f}, {t + 100, 0.3f}, {t + 200, 0.1f}}) {
      top->add_ids(token);
      top->add_probs(p);
    }
  }
  return d;
}

// The token ids of `c`'s proposals, in node order.
inline std::vector<int32_t> TokenIds(const Candidates& c) {
  std::vector<int32_t> ids;
  for (const v1::ProposedToken& t : c.tokens) ids.push_back(t.token());
  return ids;
}

class DraftProposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tokenizer::Load("models/target");
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::make_unique<Tokenizer>(*std::move(t));
  }

  std::unique_ptr<Sequence> Make(int prompt_len, int max_new, float temperature = 0,
                                 v1::AcceptanceRule rule = v1::ACCEPTANCE_RULE_REJECTION) {
    ValidatedRequest r;
    r.speculation.method = v1::SPECULATION_METHOD_DRAFT;
    r.speculation.fixed_k = 4;
    r.sampling.temperature = temperature;
    r.speculation.rule = rule;
    std::vector<int32_t> prompt(prompt_len);
    std::iota(prompt.begin(), prompt.end(), 10);
    return MakeSequence(1, r, prompt, max_new, tokenizer_.get());
  }

  static v1::VerifiedSequence Verified(const std::vector<int>& committed, int accepted) {
    v1::VerifiedSequence v;
    for (int t : committed) v.add_committed(t);
    v.set_num_accepted(accepted);
    return v;
  }

  static const std::vector<int32_t>& Cache(const Sequence& s) {
    return DraftProposer::CachedTokens(s.proposer_state(SlotOf(s, v1::SPECULATION_METHOD_DRAFT)));
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  DraftProposer draft_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_DRAFT_PROPOSER_TEST_FIXTURE_H_
