#include "coordinator/realized_speedup.h"

#include <algorithm>
#include <cmath>

namespace tandem::coordinator {

void RealizedSpeedup::Sums::Add(double t, double m, double keep) {
  Scale(keep);
  tokens += t;
  ms += m;
  phases += 1;
}

void RealizedSpeedup::Sums::Scale(double keep) {
  tokens *= keep;
  ms *= keep;
  phases *= keep;
}

int RealizedSpeedup::Bucket(int batch) {
  if (batch <= 1) return 0;
  if (batch <= 3) return 1;
  if (batch <= 7) return 2;
  if (batch <= 15) return 3;
  return 4;
}

void RealizedSpeedup::Observe(int batch, std::optional<SpeculationKind> kind, int tokens, double ms,
                              double modelled_sum, int modelled_steps) {
  if (batch < 1 || !(ms > 0) || !std::isfinite(ms) || !std::isfinite(modelled_sum)) return;
  BucketSums& b = buckets_[Bucket(batch)];
  const double keep = options_.forgetting;
  if (kind.has_value()) {
    KindSums& k = b.kinds[static_cast<int>(*kind)];
    k.speculative.Add(std::max(tokens, 0), ms, keep);
    k.modelled_sum = keep * k.modelled_sum + std::max(modelled_sum, 0.0);
    k.modelled_steps = keep * k.modelled_steps + std::max(modelled_steps, 0);
    return;
  }
  b.plain.Add(std::max(tokens, 0), ms, keep);
  for (KindSums& k : b.kinds) {
    k.speculative.Scale(options_.relax);
    k.modelled_sum *= options_.relax;
    k.modelled_steps *= options_.relax;
  }
}

double RealizedSpeedup::Ratio(int batch, SpeculationKind kind) const {
  const BucketSums& b = buckets_[Bucket(batch)];
  const Sums& s = b.kinds[static_cast<int>(kind)].speculative;
  if (!(s.ms > 0) || !(b.plain.ms > 0) || !(b.plain.tokens > 0)) return 0.0;
  return (s.tokens / s.ms) / (b.plain.tokens / b.plain.ms);
}

double RealizedSpeedup::Factor(int batch, SpeculationKind kind) const {
  const BucketSums& b = buckets_[Bucket(batch)];
  const KindSums& k = b.kinds[static_cast<int>(kind)];
  const double ratio = Ratio(batch, kind);
  if (!(ratio > 0) || !(k.modelled_steps > 0)) return 1.0;
  const double modelled = k.modelled_sum / k.modelled_steps;
  const double lowest = std::clamp(options_.min_factor, 1e-3, 1.0);
  const double raw = std::clamp(modelled / ratio, lowest, std::max(1.0, options_.max_factor));
  const double w = std::min(k.speculative.phases, b.plain.phases);
  return 1 + (raw - 1) * w / (w + options_.prior_phases);
}

}  // namespace tandem::coordinator
