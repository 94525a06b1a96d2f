// Which phases calibrate speculation on outcomes and as which kind: target prefills and
// catch-up feeds of the draft stay out; draft chains, draft trees and the other
// proposers' candidates are told apart; a phase without proposals is plain.
#include "coordinator/phase_calibration.h"

#include <gtest/gtest.h>

#include "coordinator/sequence.h"

namespace tandem::coordinator {
namespace {

class PhaseCalibrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tokenizer::Load("models/target");
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::make_unique<Tokenizer>(*std::move(t));
  }

  // A running sequence; `site` and `tree` set its candidates (`proposals` of them, 0:
  // none) and the plan verifies it with that many proposals.
  void Verify(PhasePlan& plan, int proposals, ProposerSite site, bool tree = false) {
    auto s = std::make_unique<Sequence>(
        sequences_.size(), ValidatedRequest(), std::vector<int32_t>{1, 2, 3}, 8, tokenizer_.get(),
        std::vector<int>{}, spec::ControllerConfig(), absl::Now(), nullptr);
    s->candidates.site = site;
    s->candidates.tree_option = tree;
    s->candidates.tokens.resize(proposals);
    plan.verify.add_sequences();
    plan.verify_sequences.push_back(s.get());
    plan.verify_proposed.push_back(proposals);
    sequences_.push_back(std::move(s));
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<std::unique_ptr<Sequence>> sequences_;
};

TEST_F(PhaseCalibrationTest, APhaseWithoutProposalsIsPlain) {
  PhasePlan plan;
  Verify(plan, 0, ProposerSite::kDraftWorker);
  Verify(plan, 0, ProposerSite::kCoordinator);
  const PhaseCalibration c = CalibrationOf(plan);
  EXPECT_TRUE(c.observed);
  EXPECT_FALSE(c.kind.has_value());
}

TEST_F(PhaseCalibrationTest, PrefillsAndCatchUpFeedsStayOut) {
  PhasePlan prefill;
  Verify(prefill, 3, ProposerSite::kDraftWorker);
  prefill.target_prefill.add_sequences();
  EXPECT_FALSE(CalibrationOf(prefill).observed);

  // A feed next to another sequence's draft step: left out as a whole (the feed is the
  // switch cost, priced apart).
  PhasePlan feed;
  Verify(feed, 0, ProposerSite::kDraftWorker);
  Verify(feed, 4, ProposerSite::kDraftWorker);
  feed.draft_prefill.add_sequences();
  EXPECT_FALSE(CalibrationOf(feed).observed);
}

TEST_F(PhaseCalibrationTest, DraftChainsTreesAndOtherProposersAreToldApart) {
  PhasePlan chain;
  Verify(chain, 0, ProposerSite::kCoordinator);
  Verify(chain, 4, ProposerSite::kDraftWorker);
  Verify(chain, 2, ProposerSite::kCoordinator);
  EXPECT_EQ(CalibrationOf(chain).kind, SpeculationKind::kDraftWorker);

  PhasePlan tree = chain;
  Verify(tree, 6, ProposerSite::kDraftWorker, /*tree=*/true);
  EXPECT_EQ(CalibrationOf(tree).kind, SpeculationKind::kDraftTree);

  PhasePlan other;
  Verify(other, 3, ProposerSite::kCoordinator);
  Verify(other, 2, ProposerSite::kTargetLeader);
  EXPECT_EQ(CalibrationOf(other).kind, SpeculationKind::kOther);
}

TEST_F(PhaseCalibrationTest, DraftWorkAloneCountsAsItsKind) {
  PhasePlan predraft;
  Verify(predraft, 0, ProposerSite::kCoordinator);
  predraft.draft.add_sequences();
  EXPECT_EQ(CalibrationOf(predraft).kind, SpeculationKind::kDraftWorker);
  predraft.draft_tree_option = true;
  EXPECT_EQ(CalibrationOf(predraft).kind, SpeculationKind::kDraftTree);
}

}  // namespace
}  // namespace tandem::coordinator
