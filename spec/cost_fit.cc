#include "spec/cost_fit.h"

#include <algorithm>
#include <cmath>

namespace tandem {
namespace spec {
namespace {

constexpr int kUnknowns = TwoRateCostFit::kMaxFeatures + 1;
using Augmented = std::array<std::array<double, kUnknowns + 1>, kUnknowns>;

// Solves the `n` normal equations `a` (augmented with the right-hand side) with the
// unknowns in `fixed_zero` held at 0, by Gaussian elimination with partial pivoting.
// *min_pivot becomes the smallest ratio of a pivot to its unknown's diagonal entry
// (1 - R^2 of that unknown's column on the ones before it: 0 when the data cannot tell
// it apart); a singular system (a pivot under 1e-300) gives every unknown 0.
TwoRateCostFit::Coefficients SolveWithZeros(const Augmented& a, int n,
                                            const std::array<bool, kUnknowns>& fixed_zero,
                                            double* min_pivot) {
  int free[kUnknowns], m = 0;
  for (int i = 0; i < n; ++i) {
    if (!fixed_zero[i]) free[m++] = i;
  }
  Augmented b{};
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < m; ++j) b[i][j] = a[free[i]][free[j]];
    b[i][m] = a[free[i]][n];
  }
  TwoRateCostFit::Coefficients theta{};
  *min_pivot = m > 0 ? HUGE_VAL : 0;
  for (int col = 0; col < m; ++col) {
    int pivot = col;
    for (int row = col + 1; row < m; ++row) {
      if (std::abs(b[row][col]) > std::abs(b[pivot][col])) pivot = row;
    }
    const double diagonal = a[free[col]][free[col]];
    if (diagonal > 0) *min_pivot = std::min(*min_pivot, std::abs(b[pivot][col]) / diagonal);
    if (std::abs(b[pivot][col]) < 1e-300) return TwoRateCostFit::Coefficients{};
    std::swap(b[col], b[pivot]);
    for (int row = 0; row < m; ++row) {
      if (row == col) continue;
      const double f = b[row][col] / b[col][col];
      for (int j = col; j <= m; ++j) b[row][j] -= f * b[col][j];
    }
  }
  for (int i = 0; i < m; ++i) theta[free[i]] = b[i][m] / b[i][i];
  return theta;
}

}  // namespace

void TwoRateCostFit::Sums::Add(const Sizes& x, double y, double w, int features) {
  std::array<double, kMaxUnknowns> phi{1, 0, 0};
  for (int i = 0; i < features; ++i) phi[i + 1] = x[i];
  for (int i = 0; i <= features; ++i) {
    for (int j = 0; j <= features; ++j) xx[i][j] += w * phi[i] * phi[j];
    xy[i] += w * phi[i] * y;
  }
}

void TwoRateCostFit::Sums::Scale(double keep) {
  for (auto& row : xx) {
    for (double& v : row) v *= keep;
  }
  for (double& v : xy) v *= keep;
}

TwoRateCostFit::TwoRateCostFit(int features, double forgetting, const std::vector<double>& prior,
                               double prior_weight, double prior_span)
    : features_(std::clamp(features, 1, kMaxFeatures)),
      forgetting_(std::clamp(forgetting, 1e-6, 1.0)),
      slow_forgetting_(1 - (1 - forgetting_) / kSlowerMemory),
      prior_weight_(std::max(prior_weight, 0.0)) {
  const double span = std::max(prior_span, 2.0);
  std::vector<Sizes> corners = {{1, 0}, {span, 0}};
  if (features_ == 2) corners = {{1, 1}, {1, span}, {span, span}};
  for (const Sizes& x : corners) {
    double y = prior.empty() ? 0 : prior[0];
    for (int i = 0; i < features_; ++i) {
      y += (i + 1 < static_cast<int>(prior.size()) ? prior[i + 1] : 0) * x[i];
    }
    slow_.Add(x, y, 1.0 / corners.size(), features_);
  }
  for (int i = 0; i <= features_; ++i) {
    anchor_[i] = std::max(i < static_cast<int>(prior.size()) ? prior[i] : 0.0, 0.0);
  }
  fit_ = Solve();
}

void TwoRateCostFit::Observe(const Sizes& sizes, double y) {
  Sizes x{};
  for (int i = 0; i < features_; ++i) {
    if (!std::isfinite(sizes[i])) return;
    x[i] = std::max(sizes[i], 0.0);
  }
  if (!std::isfinite(y)) return;
  y = std::max(y, 0.0);
  // Robustness: clip the cost around the prediction (see the header).
  constexpr double kScaleKeep = 0.95;
  const double predicted = Predict(x);
  double residual = y - predicted;
  if (observations_ >= kRobustAfter) {
    const double scale = std::max(residual_scale_, kMinScale * predicted);
    if (scale > 0) residual = std::clamp(residual, -kClipScales * scale, kClipScales * scale);
    y = std::max(predicted + residual, 0.0);
  }
  residual_scale_ = observations_ == 0
                        ? std::abs(residual)
                        : kScaleKeep * residual_scale_ + (1 - kScaleKeep) * std::abs(residual);
  fast_.Scale(forgetting_);
  fast_.Add(x, y, 1.0, features_);
  slow_.Scale(slow_forgetting_);
  slow_.Add(x, y, 1.0, features_);
  ++observations_;
  bool well_conditioned = false;
  fit_ = Solve(&well_conditioned);
  if (well_conditioned) anchor_ = fit_;
}

TwoRateCostFit::Coefficients TwoRateCostFit::Solve(bool* well_conditioned) const {
  const int n = features_ + 1;
  // The fast sums plus the long memory's, normalised to prior_weight calls.
  const double slow_weight = slow_.xx[0][0] > 0 ? prior_weight_ / slow_.xx[0][0] : 0.0;
  Augmented a{};
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) a[i][j] = fast_.xx[i][j] + slow_weight * slow_.xx[i][j];
    a[i][n] = fast_.xy[i] + slow_weight * slow_.xy[i];
  }
  if (well_conditioned != nullptr) {
    double min_pivot = 0;
    SolveWithZeros(a, n, {false, false, false}, &min_pivot);
    *well_conditioned = min_pivot > kWellConditioned;
  }
  // The anchor: a ridge towards the last well-conditioned fit, each unknown weighed
  // relative to its own diagonal entry (the sizes have different scales).
  for (int i = 0; i < n; ++i) {
    const double ridge = kRidge * std::max(a[i][i], 1e-12);
    a[i][i] += ridge;
    a[i][n] += ridge * anchor_[i];
  }
  std::array<bool, kUnknowns> fixed_zero{false, false, false};
  for (int round = 0; round < n; ++round) {
    double min_pivot = 0;
    const Coefficients theta = SolveWithZeros(a, n, fixed_zero, &min_pivot);
    int worst = -1;
    for (int i = 0; i < n; ++i) {
      if (!fixed_zero[i] && theta[i] < 0 && (worst < 0 || theta[i] < theta[worst])) worst = i;
    }
    if (worst < 0) return theta;
    fixed_zero[worst] = true;
  }
  return Coefficients{};
}

double TwoRateCostFit::Predict(const Sizes& x) const {
  const Coefficients theta = Fit();
  double y = theta[0];
  for (int i = 0; i < features_; ++i) y += theta[i + 1] * std::max(x[i], 0.0);
  return y;
}

CostModel BatchCostModel(const BatchCallFit& verify, const LinearCostFit& draft, int batch,
                         const CostModel& fallback, double phase_overhead_ms,
                         int min_observations) {
  if (verify.observations() < min_observations) return fallback;
  batch = std::max(batch, 1);
  const double h = std::isfinite(phase_overhead_ms) ? std::max(phase_overhead_ms, 0.0) : 0.0;
  const double step = verify.Predict(batch, batch) + h;
  if (!(step > 0)) return fallback;
  CostModel model = fallback;
  if (draft.observations() >= min_observations) {
    model.draft_cost = draft.slope() * batch / step;
    model.overhead = (draft.intercept() + h) / step;
  }
  const double a = verify.intercept() + verify.per_sequence() * batch + h, b = verify.per_row();
  model.verify_cost = [a, b, batch, step](int k) {
    return (a + b * batch * (std::max(k, 0) + 1)) / step;
  };
  return model;
}

double BatchFeedCost(const BatchCallFit& verify, const LinearCostFit& feed, int batch,
                     double phase_overhead_ms, int min_observations) {
  if (feed.observations() < min_observations) return 0.0;
  batch = std::max(batch, 1);
  const double h = std::isfinite(phase_overhead_ms) ? std::max(phase_overhead_ms, 0.0) : 0.0;
  const double step = verify.Predict(batch, batch) + h;
  return step > 0 ? std::max(feed.slope(), 0.0) * batch / step : 0.0;
}

}  // namespace spec
}  // namespace tandem
