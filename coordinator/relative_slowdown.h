// How much slower one kind of work runs than the call-time fits predict, relative to
// a reference kind (docs/architecture.md §3, "Contention"). The engine's use: a
// worker's call while the other worker runs one in the same phase, against the same
// call alone. When the draft and the target share cores (co-located processes without
// disjoint pinning) an overlapped verify or draft takes longer, which the fits, fed by
// solo calls, cannot see; the pipelining planner stretches overlapped calls by it.
// Each observation compares a time with its prediction: treated and reference
// observations keep separate exponentially weighted means of r = log(observed /
// predicted) (each observation weighs the past of its kind by `forgetting`). The
// slowdown is exp(mean_treated - mean_reference), shrunk towards 1 by a prior worth
// `prior_weight` observations, and clamped to [1, max_slowdown] (treated work is not
// faster; a faster treated mean is noise). Each reference observation also multiplies
// the treated evidence by `relax`, so a slowdown measured long ago relaxes towards the
// prior and the treated kind of work is tried again after a while.
// Pure and deterministic; no I/O. Not thread-safe (the engine thread owns it).
#ifndef TANDEM_COORDINATOR_RELATIVE_SLOWDOWN_H_
#define TANDEM_COORDINATOR_RELATIVE_SLOWDOWN_H_

namespace tandem::coordinator {

struct RelativeSlowdownOptions {
  double prior_weight = 4;    // > 0: calls the prior (no slowdown) is worth.
  double forgetting = 0.95;   // (0, 1]: weight the past keeps per call of its kind.
  double relax = 0.995;       // (0, 1]: treated evidence kept per reference observation.
  double max_slowdown = 4.0;  // >= 1: largest factor reported.
};

class RelativeSlowdown {
 public:
  explicit RelativeSlowdown(const RelativeSlowdownOptions& options = {}) : options_(options) {}

  // One piece of work that took `observed_ms` where the fits predicted `predicted_ms`;
  // `treated`: of the treated kind, else the reference kind. Ignored unless both times
  // are finite and > 0.
  void Observe(bool treated, double observed_ms, double predicted_ms);

  // The factor by which treated work is slower than reference work, [1, max_slowdown];
  // 1 before any treated observation.
  double Factor() const;
  // Discounted treated observations behind Factor() (how much evidence it rests on).
  double treated_weight() const { return treated_.weight; }

 private:
  struct Mean {
    double weight = 0, sum = 0;  // Discounted count and sum of log ratios.
    void Add(double r, double forgetting);
    double Of() const { return weight > 0 ? sum / weight : 0.0; }
  };
  RelativeSlowdownOptions options_;
  Mean reference_, treated_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_RELATIVE_SLOWDOWN_H_
