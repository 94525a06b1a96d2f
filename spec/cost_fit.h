// Online fit of a step's cost as a linear function of its size, y = a + b x, by
// exponentially weighted least squares. The coordinator fits verify-call time against
// the rows verified and draft-call time against the tokens proposed, and turns the
// fits into the cost model terms c, nu(K) and o for the speculation controller
// (docs/architecture.md §3).
// Pure and deterministic; no I/O.
#ifndef TANDEM_SPEC_COST_FIT_H_
#define TANDEM_SPEC_COST_FIT_H_

#include "spec/cost_model.h"

namespace tandem {
namespace spec {

class LinearCostFit {
 public:
  // `forgetting` in (0, 1]: weight kept by the past at each new observation.
  // The prior (y = prior_intercept + prior_slope x, worth `prior_weight`
  // observations spread over x in [1, prior_span]) holds the fit where the data do
  // not vary enough in x to separate intercept from slope.
  LinearCostFit(double forgetting, double prior_intercept, double prior_slope,
                double prior_weight = 2.0, double prior_span = 16.0);

  // Adds one measurement: size x (>= 0), cost y (ms, >= 0). Non-finite values are
  // ignored.
  void Observe(double x, double y);

  double intercept() const;  // a, clamped to >= 0.
  double slope() const;      // b, clamped to >= 0.
  double Predict(double x) const { return intercept() + slope() * x; }
  int observations() const { return observations_; }

 private:
  void Solve(double* a, double* b) const;

  double forgetting_;
  // Weighted sums: w, w x, w y, w x x, w x y.
  double sw_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  int observations_ = 0;
};

// Cost model of one speculative step over a batch of `batch` sequences, in units of a
// plain target step of that batch T = verify.Predict(batch) + h, where h (ms, >= 0) is
// the coordinator's own time per phase (planning, applying results) that every step
// pays once:
//   c     = draft.slope() * batch / T      (drafting one token for every sequence)
//   o     = (draft.intercept() + h) / T    (the draft call's fixed cost, and the phase
//                                           a draft needs before its verify)
//   nu(K) = (verify.Predict(batch (K + 1)) + h) / T.
// `batch` >= 1. Until the verify fit has `min_observations`, `fallback`; until the
// draft fit has them, `fallback`'s c and o with the measured nu(K) (a server without a
// draft worker never measures c, and needs none: its proposers run on the coordinator).
CostModel BatchCostModel(const LinearCostFit& verify, const LinearCostFit& draft, int batch,
                         const CostModel& fallback, double phase_overhead_ms = 0,
                         int min_observations = 8);

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_COST_FIT_H_
