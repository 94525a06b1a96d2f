#include "spec/cost_fit.h"

#include <algorithm>
#include <cmath>

namespace tandem {
namespace spec {

LinearCostFit::LinearCostFit(double forgetting, double prior_intercept, double prior_slope,
                             double prior_weight, double prior_span)
    : forgetting_(std::clamp(forgetting, 1e-6, 1.0)) {
  // Two pseudo-points at x = 1 and x = prior_span on the prior line.
  const double w = std::max(prior_weight, 0.0) / 2;
  for (double x : {1.0, std::max(prior_span, 2.0)}) {
    const double y = prior_intercept + prior_slope * x;
    sw_ += w;
    sx_ += w * x;
    sy_ += w * y;
    sxx_ += w * x * x;
    sxy_ += w * x * y;
  }
}

void LinearCostFit::Observe(double x, double y) {
  if (!std::isfinite(x) || !std::isfinite(y)) return;
  x = std::max(x, 0.0);
  y = std::max(y, 0.0);
  sw_ = forgetting_ * sw_ + 1;
  sx_ = forgetting_ * sx_ + x;
  sy_ = forgetting_ * sy_ + y;
  sxx_ = forgetting_ * sxx_ + x * x;
  sxy_ = forgetting_ * sxy_ + x * y;
  ++observations_;
}

void LinearCostFit::Solve(double* a, double* b) const {
  if (sw_ <= 0) {
    *a = 0;
    *b = 0;
    return;
  }
  const double mean_x = sx_ / sw_, mean_y = sy_ / sw_;
  const double var_x = sxx_ / sw_ - mean_x * mean_x;
  const double cov = sxy_ / sw_ - mean_x * mean_y;
  *b = var_x > 1e-12 ? cov / var_x : 0.0;
  *a = mean_y - *b * mean_x;
  // A negative part is noise: keep the line through the mean with the other >= 0.
  if (*b < 0) {
    *b = 0;
    *a = mean_y;
  } else if (*a < 0) {
    *a = 0;
    *b = mean_x > 0 ? mean_y / mean_x : 0.0;
  }
}

double LinearCostFit::intercept() const {
  double a, b;
  Solve(&a, &b);
  return a;
}

double LinearCostFit::slope() const {
  double a, b;
  Solve(&a, &b);
  return b;
}

CostModel BatchCostModel(const LinearCostFit& verify, const LinearCostFit& draft, int batch,
                         const CostModel& fallback, double phase_overhead_ms,
                         int min_observations) {
  if (verify.observations() < min_observations) return fallback;
  batch = std::max(batch, 1);
  const double h = std::isfinite(phase_overhead_ms) ? std::max(phase_overhead_ms, 0.0) : 0.0;
  const double step = verify.Predict(batch) + h;
  if (!(step > 0)) return fallback;
  CostModel model = fallback;
  if (draft.observations() >= min_observations) {
    model.draft_cost = draft.slope() * batch / step;
    model.overhead = (draft.intercept() + h) / step;
  }
  const double a = verify.intercept() + h, b = verify.slope();
  model.verify_cost = [a, b, batch, step](int k) {
    return (a + b * batch * (std::max(k, 0) + 1)) / step;
  };
  return model;
}

}  // namespace spec
}  // namespace tandem
