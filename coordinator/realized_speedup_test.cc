#include "coordinator/realized_speedup.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem::coordinator {
namespace {

constexpr SpeculationKind kDraft = SpeculationKind::kDraftWorker;
constexpr SpeculationKind kOther = SpeculationKind::kOther;

// `n` phases of each kind in alternation: plain ones commit `batch` tokens in 1 ms,
// speculative ones `spec_tokens` in `spec_ms`, modelled at `modelled` each.
void Feed(RealizedSpeedup& r, int batch, int n, double spec_tokens, double spec_ms, double modelled,
          SpeculationKind kind = SpeculationKind::kDraftWorker) {
  for (int i = 0; i < n; ++i) {
    r.Observe(batch, std::nullopt, batch, 1.0, 0, 0);
    r.Observe(batch, kind, static_cast<int>(spec_tokens), spec_ms, modelled * batch, batch);
  }
}

TEST(RealizedSpeedupTest, NoEvidenceMeansNoCorrection) {
  RealizedSpeedup r;
  EXPECT_DOUBLE_EQ(r.Factor(4, kDraft), 1.0);
  EXPECT_DOUBLE_EQ(r.Ratio(4, kDraft), 0.0);
  for (int i = 0; i < 50; ++i) r.Observe(4, std::nullopt, 4, 1.0, 0, 0);  // Plain phases only.
  EXPECT_DOUBLE_EQ(r.Factor(4, kDraft), 1.0);
}

TEST(RealizedSpeedupTest, ALosingSpeculationIsChargedWhatTheModelMissed) {
  RealizedSpeedupOptions o;
  o.forgetting = 1;
  o.relax = 1;
  o.prior_phases = 1e-9;
  RealizedSpeedup r(o);
  // Modelled 1.2x, realized: 4 tokens in 1.25 ms against 4 in 1 ms = 0.8x.
  Feed(r, 4, 100, 4, 1.25, 1.2);
  EXPECT_NEAR(r.Ratio(4, kDraft), 0.8, 1e-9);
  EXPECT_NEAR(r.Factor(4, kDraft), 1.2 / 0.8, 1e-6);
  // The controller's S times 1 / kappa is the realized ratio: below 1, off.
  EXPECT_LT(1.2 / r.Factor(4, kDraft), 1.0);
}

TEST(RealizedSpeedupTest, TheClosedLoopCorrectsTheWholeErrorOfTheUncalibratedModel) {
  RealizedSpeedupOptions o;
  o.forgetting = 0.9;
  o.relax = 1;
  o.prior_phases = 1e-9;
  // The cost model says 1.5x; speculation realizes 1.2x (6 tokens in 5 ms against 1 in
  // 1 ms) however it is charged. Fed the model's own S, the factor settles at 1.5 / 1.2;
  // fed the S already divided by the factor in use, it would settle at the square root.
  RealizedSpeedup fed_model(o), fed_charged(o);
  for (int i = 0; i < 300; ++i) {
    const double charged_factor = fed_charged.Factor(1, kDraft);
    for (RealizedSpeedup* r : {&fed_model, &fed_charged}) {
      r->Observe(1, std::nullopt, 1, 1.0, 0, 0);
      r->Observe(1, kDraft, 6, 5.0, r == &fed_model ? 1.5 : 1.5 / charged_factor, 1);
    }
  }
  EXPECT_NEAR(fed_model.Factor(1, kDraft), 1.25, 1e-3);
  EXPECT_NEAR(fed_charged.Factor(1, kDraft), std::sqrt(1.25), 1e-2);
}

TEST(RealizedSpeedupTest, AGainAboveTheModelLowersTheCostWithinABound) {
  RealizedSpeedupOptions o;
  o.prior_phases = 1e-9;
  RealizedSpeedup r(o);
  Feed(r, 1, 100, 3, 2.0, 1.35);  // Realized 1.5x, modelled 1.35x: kappa 0.9.
  EXPECT_NEAR(r.Ratio(1, kDraft), 1.5, 1e-9);
  EXPECT_NEAR(r.Factor(1, kDraft), 0.9, 1e-6);
  // The controller's S / kappa is then the realized gain.
  EXPECT_NEAR(1.35 / r.Factor(1, kDraft), 1.5, 1e-6);
  // Far above the model: at most min_factor.
  RealizedSpeedup far(o);
  Feed(far, 1, 100, 3, 1.0, 1.2);  // Realized 3x, modelled 1.2x.
  EXPECT_NEAR(far.Factor(1, kDraft), o.min_factor, 1e-9);
  // A chain that realizes more than modelled beats a tree whose model was right, as
  // it does on outcomes (chain 2.0x realized, modelled 1.7x; tree 1.6x, modelled 1.6x).
  RealizedSpeedup both(o);
  Feed(both, 1, 100, 2, 1.0, 1.7, kDraft);
  Feed(both, 1, 100, 8, 5.0, 1.6, SpeculationKind::kDraftTree);
  EXPECT_GT(1.7 / both.Factor(1, kDraft), 1.6 / both.Factor(1, SpeculationKind::kDraftTree));
}

TEST(RealizedSpeedupTest, BatchSizesAreMeasuredApart) {
  RealizedSpeedupOptions o;
  o.prior_phases = 1e-9;
  RealizedSpeedup r(o);
  Feed(r, 4, 100, 4, 2.0, 1.2);  // Losing at 4 (and 5-7: the same bucket).
  Feed(r, 1, 100, 2, 1.0, 2.0);  // Paying at 1, as modelled.
  EXPECT_GT(r.Factor(4, kDraft), 2.0);
  EXPECT_DOUBLE_EQ(r.Factor(6, kDraft), r.Factor(4, kDraft));
  EXPECT_DOUBLE_EQ(r.Factor(1, kDraft), 1.0);
  EXPECT_DOUBLE_EQ(r.Factor(16, kDraft), 1.0);  // Nothing measured there.
  EXPECT_EQ(RealizedSpeedup::Bucket(3), 1);
  EXPECT_EQ(RealizedSpeedup::Bucket(8), 3);
  EXPECT_EQ(RealizedSpeedup::Bucket(100), 4);
}

TEST(RealizedSpeedupTest, KindsAreMeasuredApart) {
  RealizedSpeedupOptions o;
  o.prior_phases = 1e-9;
  RealizedSpeedup r(o);
  Feed(r, 4, 100, 4, 2.0, 1.2, kDraft);   // The draft loses at 4 ...
  Feed(r, 4, 100, 6, 1.2, 1.25, kOther);  // ... while prompt lookup pays as modelled.
  EXPECT_GT(r.Factor(4, kDraft), 2.0);
  EXPECT_NEAR(r.Factor(4, kOther), 1.0, 1e-9);
  EXPECT_NEAR(r.Ratio(4, kOther), 1.25, 1e-9);
  // The draft's tree option that loses does not tax its chains either.
  RealizedSpeedup trees(o);
  Feed(trees, 4, 100, 4, 2.0, 1.2, SpeculationKind::kDraftTree);
  Feed(trees, 4, 100, 6, 1.2, 1.25, kDraft);
  EXPECT_GT(trees.Factor(4, SpeculationKind::kDraftTree), 2.0);
  EXPECT_NEAR(trees.Factor(4, kDraft), 1.0, 1e-9);
}

TEST(RealizedSpeedupTest, ThinEvidenceIsShrunkAndOldEvidenceRelaxes) {
  RealizedSpeedupOptions o;
  o.forgetting = 1;
  o.relax = 0.99;
  o.prior_phases = 30;
  RealizedSpeedup r(o);
  Feed(r, 4, 3, 4, 2.0, 1.0);  // Raw factor 2 on 3 phases of each kind: 1 + 1 * 3 / 33.
  EXPECT_NEAR(r.Factor(4, kDraft), 1 + 3.0 / 33, 1e-3);
  Feed(r, 4, 200, 4, 2.0, 1.0);
  const double measured = r.Factor(4, kDraft);
  EXPECT_GT(measured, 1.6);
  // Speculation stopped: plain phases only. Its evidence fades, and so does kappa.
  for (int i = 0; i < 1000; ++i) r.Observe(4, std::nullopt, 4, 1.0, 0, 0);
  EXPECT_LT(r.Factor(4, kDraft), 1.05);
}

TEST(RealizedSpeedupTest, IgnoresEmptyAndBadPhases) {
  RealizedSpeedup r;
  r.Observe(0, kDraft, 4, 1.0, 1, 1);
  r.Observe(4, kDraft, 4, 0.0, 1, 1);
  r.Observe(4, kDraft, 4, NAN, 1, 1);
  r.Observe(4, std::nullopt, 4, 1.0, 0, 0);
  EXPECT_DOUBLE_EQ(r.Ratio(4, kDraft), 0.0);
}

}  // namespace
}  // namespace tandem::coordinator
