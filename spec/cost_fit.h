// Online fits of a worker call's cost as a linear function of its size. The coordinator
// fits verify-call time against the sequences and rows of the batch, and draft-call
// time against the tokens proposed, and turns the fits into the cost model terms c,
// nu(K) and o for the speculation controller and the pipelining planner
// (docs/architecture.md §3). Pure and deterministic; no I/O.
//
// Both fits share one estimator (TwoRateCostFit): exponentially weighted least
// squares (each call weighs the past by `forgetting`), with
//  * a long memory as its prior: a second fit of the same calls that forgets 20 times
//    more slowly, worth `prior_weight` calls. A long run of calls of one shape (plain
//    steps of one row each, say) sharpens the fit there while the slope that earlier
//    calls of other shapes measured lives on in the long memory, instead of decaying to
//    noise. The long memory starts from a guess (a plane through the sizes 1 and
//    prior_span), so the fit is defined before any call;
//  * robustness: once kRobustAfter calls are in, a cost is clipped to the prediction
//    ± kClipScales s, with s a moving mean of the absolute (clipped) residuals and at
//    least kMinScale of the prediction; s grows by up to 10 % a call while every
//    residual is clipped, so a real change of cost is followed within tens of calls
//    while a call delayed by the scheduler moves the fit by a bounded amount;
//  * non-negative coefficients: a negative one is noise, fixed at 0 with the others
//    refitted (least squares under that constraint);
//  * an anchor for what the calls cannot tell: a ridge of relative weight kRidge pulls
//    the fit towards its last well-conditioned solution (at first the prior). After a
//    very long run of one shape even the long memory holds only that shape, and the
//    normal equations are singular along the other directions: without the anchor the
//    fit fell to zero there (every coefficient 0, a verify "free", speculation priced
//    13 steps and turned off for good); with it the data fix the level at that shape
//    and the anchor keeps the rest.
#ifndef TANDEM_SPEC_COST_FIT_H_
#define TANDEM_SPEC_COST_FIT_H_

#include <array>
#include <vector>

#include "spec/cost_model.h"

namespace tandem {
namespace spec {

// y = theta_0 + sum_i theta_i x_i over `features` (1 or 2) sizes x_i >= 0.
class TwoRateCostFit {
 public:
  static constexpr int kMaxFeatures = 2;
  static constexpr int kRobustAfter = 8;
  static constexpr double kClipScales = 3.0;
  static constexpr double kMinScale = 0.05;
  static constexpr double kSlowerMemory = 20;  // The long memory forgets this much slower.
  static constexpr double kRidge = 1e-7;       // The anchor's weight, relative to the data.
  // A solve in which every unknown's column keeps more than this share of its weight
  // once the columns before it are accounted for (1 - R^2) is well-conditioned: it
  // becomes the anchor.
  static constexpr double kWellConditioned = 1e-4;
  using Sizes = std::array<double, kMaxFeatures>;
  using Coefficients = std::array<double, kMaxFeatures + 1>;

  // `prior` = {intercept, per feature...} (features + 1 values): the long memory's
  // starting guess, points at the corners x in {1, prior_span}^features with
  // x_1 <= x_2 (a batch has at least as many rows as sequences). `prior_weight` > 0:
  // calls the long memory is worth in the fit.
  TwoRateCostFit(int features, double forgetting, const std::vector<double>& prior,
                 double prior_weight, double prior_span);

  // One call of sizes `x` (features values, clamped to >= 0) that cost `y` (ms, >= 0).
  // Non-finite values are ignored.
  void Observe(const Sizes& x, double y);
  // {intercept, per feature...}, each >= 0 (solved once per observation).
  const Coefficients& Fit() const { return fit_; }
  double Predict(const Sizes& x) const;
  int observations() const { return observations_; }

 private:
  static constexpr int kMaxUnknowns = kMaxFeatures + 1;
  // Weighted sums of phi phi^T and phi y, phi = (1, x...).
  struct Sums {
    std::array<std::array<double, kMaxUnknowns>, kMaxUnknowns> xx{};
    std::array<double, kMaxUnknowns> xy{};
    void Add(const Sizes& x, double y, double w, int features);
    void Scale(double keep);
  };
  int features_;
  double forgetting_, slow_forgetting_, prior_weight_;
  double residual_scale_ = 0;
  int observations_ = 0;
  Sums fast_, slow_;
  Coefficients fit_{};
  Coefficients anchor_{};  // The last well-conditioned fit (at first the prior).

  // The constrained least squares of fast_ and slow_, anchored; *well_conditioned (may
  // be null) says whether the data alone determine every coefficient.
  Coefficients Solve(bool* well_conditioned = nullptr) const;
};

// y = a + b x: draft-call time against the tokens proposed, draft prefill time against
// the tokens fed.
class LinearCostFit {
 public:
  // `forgetting` in (0, 1]; the long memory starts from y = prior_intercept +
  // prior_slope x at x = 1 and x = prior_span and is worth `prior_weight` calls.
  LinearCostFit(double forgetting, double prior_intercept, double prior_slope,
                double prior_weight = 2.0, double prior_span = 16.0)
      : fit_(1, forgetting, {prior_intercept, prior_slope}, prior_weight, prior_span) {}

  // One call of size x (>= 0) that cost y (ms, >= 0); non-finite values are ignored.
  void Observe(double x, double y) { fit_.Observe({x, 0}, y); }
  double intercept() const { return fit_.Fit()[0]; }  // a >= 0.
  double slope() const { return fit_.Fit()[1]; }      // b >= 0.
  double Predict(double x) const { return fit_.Predict({x, 0}); }
  int observations() const { return fit_.observations(); }

 private:
  TwoRateCostFit fit_;
};

// y = a + b s + c r for a batch of s sequences and r rows (a verify call: each sequence
// costs something of its own — its attention, its acceptance — besides its rows, so a
// batch of 4 sequences of 1 row costs more than 1 sequence of 4 rows).
class BatchCallFit {
 public:
  // The long memory starts from y = prior_intercept + prior_per_sequence s +
  // prior_per_row r and is worth `prior_weight` calls.
  BatchCallFit(double forgetting, double prior_intercept, double prior_per_sequence,
               double prior_per_row, double prior_weight = 2.0, double prior_span = 16.0)
      : fit_(2, forgetting, {prior_intercept, prior_per_sequence, prior_per_row}, prior_weight,
             prior_span) {}

  // One call over `sequences` sequences and `rows` rows (>= sequences) that cost y ms.
  void Observe(double sequences, double rows, double y) { fit_.Observe({sequences, rows}, y); }
  double intercept() const { return fit_.Fit()[0]; }
  double per_sequence() const { return fit_.Fit()[1]; }
  double per_row() const { return fit_.Fit()[2]; }
  double Predict(double sequences, double rows) const { return fit_.Predict({sequences, rows}); }
  int observations() const { return fit_.observations(); }

 private:
  TwoRateCostFit fit_;
};

// Cost model of one speculative step over a batch of `batch` sequences, in units of a
// plain target step of that batch T = verify.Predict(batch, batch) + h, where h (ms,
// >= 0) is the coordinator's own time per phase (planning, applying results) that
// every step pays once:
//   c     = draft.slope() * batch / T      (drafting one token for every sequence)
//   o     = (draft.intercept() + h) / T    (the draft call's fixed cost, and the phase
//                                           a draft needs before its verify)
//   nu(K) = (verify.Predict(batch, batch (K + 1)) + h) / T.
// `batch` >= 1. Until the verify fit has `min_observations`, `fallback`; until the
// draft fit has them, `fallback`'s c and o with the measured nu(K) (a server without a
// draft worker never measures c, and needs none: its proposers run on the coordinator).
CostModel BatchCostModel(const BatchCallFit& verify, const LinearCostFit& draft, int batch,
                         const CostModel& fallback, double phase_overhead_ms = 0,
                         int min_observations = 8);

// Switch cost per token fed to a draft that must catch up (a fresh prompt, or tokens
// committed while it was off), in the units of BatchCostModel and priced like its c:
// feed.slope() * batch / T, as if every sequence of the batch fed its own tokens. A
// feed delays the whole batch's step while it serves one sequence, so its price per
// sequence is n times its share of T, the same accounting that makes c the cost of
// drafting for all n. 0 (unknown, not charged) until `feed` has `min_observations` or
// when T <= 0.
double BatchFeedCost(const BatchCallFit& verify, const LinearCostFit& feed, int batch,
                     double phase_overhead_ms = 0, int min_observations = 4);

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_COST_FIT_H_
