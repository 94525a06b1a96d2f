// How much slower one worker's calls run while the other worker runs a call in the same
// phase (docs/architecture.md §3, "Contention"). When the draft and the target share
// cores (co-located processes without disjoint pinning), an overlapped verify or draft
// takes longer than the same call alone; the call-time fits, fed by both kinds of call,
// cannot tell them apart, and a pipelining mode predicted from them would overlap work
// that only slows itself down.
//
// Every call's time is compared with its fit's prediction made before the call is
// observed: solo and overlapped calls keep separate exponentially weighted means of
// r = log(observed / predicted) (each call weighs the past of its kind by
// `forgetting`). The slowdown is exp(mean_overlapped - mean_solo), shrunk towards 1
// (no contention) by a prior worth `prior_weight` calls, and clamped to [1, max]
// (overlap never makes a call faster; a faster overlapped mean is noise). Each solo
// call also multiplies the overlapped evidence by `relax`, so a slowdown measured long
// ago relaxes towards the prior and overlap is tried again after a while.
// Pure and deterministic; no I/O. Not thread-safe (the engine thread owns it).
#ifndef TANDEM_COORDINATOR_OVERLAP_SLOWDOWN_H_
#define TANDEM_COORDINATOR_OVERLAP_SLOWDOWN_H_

namespace tandem::coordinator {

struct OverlapSlowdownOptions {
  double prior_weight = 4;    // > 0: calls the prior (no slowdown) is worth.
  double forgetting = 0.95;   // (0, 1]: weight the past keeps per call of its kind.
  double relax = 0.995;       // (0, 1]: overlapped evidence kept per solo call.
  double max_slowdown = 4.0;  // >= 1: largest factor reported.
};

class OverlapSlowdown {
 public:
  explicit OverlapSlowdown(const OverlapSlowdownOptions& options = {}) : options_(options) {}

  // One call that took `observed_ms` where its fit predicted `predicted_ms`;
  // `overlapped`: the other worker ran a call in the same phase. Ignored unless both
  // times are finite and > 0.
  void Observe(bool overlapped, double observed_ms, double predicted_ms);

  // The factor by which an overlapped call is slower than a solo one, [1, max_slowdown];
  // 1 before any overlapped call.
  double Factor() const;
  // Discounted overlapped calls behind Factor() (how much evidence it rests on).
  double overlapped_weight() const { return overlapped_.weight; }

 private:
  struct Mean {
    double weight = 0, sum = 0;  // Discounted count and sum of log ratios.
    void Add(double r, double forgetting);
    double Of() const { return weight > 0 ? sum / weight : 0.0; }
  };
  OverlapSlowdownOptions options_;
  Mean solo_, overlapped_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_OVERLAP_SLOWDOWN_H_
