#include "coordinator/overlap_slowdown.h"

#include <algorithm>
#include <cmath>

namespace tandem::coordinator {

void OverlapSlowdown::Mean::Add(double r, double forgetting) {
  weight = forgetting * weight + 1;
  sum = forgetting * sum + r;
}

void OverlapSlowdown::Observe(bool overlapped, double observed_ms, double predicted_ms) {
  if (!std::isfinite(observed_ms) || !std::isfinite(predicted_ms) || observed_ms <= 0 ||
      predicted_ms <= 0) {
    return;
  }
  const double r = std::log(observed_ms / predicted_ms);
  if (overlapped) {
    overlapped_.Add(r, options_.forgetting);
    return;
  }
  solo_.Add(r, options_.forgetting);
  overlapped_.weight *= options_.relax;
  overlapped_.sum *= options_.relax;
}

double OverlapSlowdown::Factor() const {
  if (overlapped_.weight <= 0) return 1.0;
  // The overlapped mean shrunk towards the solo one (no contention) by the prior.
  const double shrink = overlapped_.weight / (overlapped_.weight + options_.prior_weight);
  const double log_factor = shrink * (overlapped_.Of() - solo_.Of());
  return std::clamp(std::exp(log_factor), 1.0, std::max(1.0, options_.max_slowdown));
}

}  // namespace tandem::coordinator
