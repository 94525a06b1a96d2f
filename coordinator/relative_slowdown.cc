#include "coordinator/relative_slowdown.h"

#include <algorithm>
#include <cmath>

namespace tandem::coordinator {

void RelativeSlowdown::Mean::Add(double r, double forgetting) {
  weight = forgetting * weight + 1;
  sum = forgetting * sum + r;
}

void RelativeSlowdown::Observe(bool treated, double observed_ms, double predicted_ms) {
  if (!std::isfinite(observed_ms) || !std::isfinite(predicted_ms) || observed_ms <= 0 ||
      predicted_ms <= 0) {
    return;
  }
  const double r = std::log(observed_ms / predicted_ms);
  if (treated) {
    treated_.Add(r, options_.forgetting);
    return;
  }
  reference_.Add(r, options_.forgetting);
  treated_.weight *= options_.relax;
  treated_.sum *= options_.relax;
}

double RelativeSlowdown::Factor() const {
  if (treated_.weight <= 0) return 1.0;
  // The treated mean shrunk towards the reference one (no slowdown) by the prior.
  const double shrink = treated_.weight / (treated_.weight + options_.prior_weight);
  const double log_factor = shrink * (treated_.Of() - reference_.Of());
  return std::clamp(std::exp(log_factor), 1.0, std::max(1.0, options_.max_slowdown));
}

}  // namespace tandem::coordinator
