// What speculation really gains, measured on outcomes (docs/architecture.md §3,
// "Calibration"): per batch-size bucket and kind of speculation, committed tokens per
// millisecond of the phases that speculated that way (kDraftWorker: the draft worker
// worked or its candidates were verified; kDraftTree: the same for the draft's tree option;
// kOther: only proposals of the coordinator or the target leader were verified) against the phases
// in which nothing speculated (plain phases), next to the mean speedup the speculation controller
// modelled for the speculative steps. Kinds are measured apart so that a draft that loses does not
// make prompt lookup look expensive. Whatever the cost terms miss (cores shared by the draft and
// the target, thread wake-ups, a verify row that costs more in a mixed batch than the fit says)
// shows up here as a realized ratio R below the modelled S, and the calibration factor
//   kappa = S_modelled / R, clamped to [min_factor, max_factor],
// shrunk towards 1 by `prior_phases` (kappa = 1 + (raw - 1) w / (w + prior_phases),
// w the smaller discounted phase count of the two kinds), makes the controller charge
// kappa times the modelled cost of a speculative step: it turns speculation off where
// the realized gain is below 1 and trims an optimistic model elsewhere; a kind that
// realizes more than modelled (a pessimistic model: pipelining hiding draft time the terms
// charge) is charged less, down to min_factor, so that the choice between two kinds (a
// draft's chain or its tree) follows what each realizes, not which model errs more.
// Each phase weighs the past of its bucket by `forgetting`; speculative evidence also
// decays by `relax` per plain phase, so a bucket where speculation stopped relaxes to
// kappa = 1 and speculation is tried again after a while.
// Pure and deterministic; no I/O. Not thread-safe (the engine thread owns it).
#ifndef TANDEM_COORDINATOR_REALIZED_SPEEDUP_H_
#define TANDEM_COORDINATOR_REALIZED_SPEEDUP_H_

#include <array>
#include <optional>

namespace tandem::coordinator {

struct RealizedSpeedupOptions {
  double forgetting = 0.995;  // (0, 1]: weight a bucket's past keeps per phase.
  // (0, 1]: speculative evidence kept per plain phase (of its bucket). 0.9999: a
  // half-life of about 7000 plain phases, so that a loss measured at a batch size
  // outlives a few thousand plain phases (0.999 kept 2 % of it over the 4000 plain
  // phases between two concurrency-4 rows of a bench grid, and every row paid to learn
  // it again: bench/README.md, "Calibration that outlives plain phases").
  double relax = 0.9999;
  double prior_phases = 30;   // > 0: phases of evidence worth half the measured factor.
  double max_factor = 4;      // >= 1.
  double min_factor = 0.8;    // (0, 1]: the most a pessimistic model is corrected.
};

// The kind of a speculative phase. kDraftTree: the phase drafted or verified a draft
// tree the controller chose over the chain (its tree option), which is calibrated apart
// so that trees that lose do not make the draft's chains look expensive.
enum class SpeculationKind { kDraftWorker = 0, kOther = 1, kDraftTree = 2 };

class RealizedSpeedup {
 public:
  explicit RealizedSpeedup(const RealizedSpeedupOptions& options = {}) : options_(options) {}

  // One phase over a batch of `batch` running sequences that took `ms` and committed
  // `tokens`; `kind`: empty for a plain phase, else how it speculated;
  // `modelled_sum` / `modelled_steps`: the sum and count of the controller's modelled
  // speedups of its speculative sequence steps, uncalibrated (cost_factor 1:
  // ControllerChoice::uncalibrated_speedup), so the closed loop settles at kappa = S / R.
  // Ignored for batch < 1, ms <= 0 or non-finite values.
  void Observe(int batch, std::optional<SpeculationKind> kind, int tokens, double ms,
               double modelled_sum, int modelled_steps);

  // kappa of `kind` for a batch of `batch` sequences (1 without evidence of both the
  // kind and plain phases).
  double Factor(int batch, SpeculationKind kind) const;
  // R = speculative tokens/ms of `kind` over plain tokens/ms for the bucket (0 when
  // unknown).
  double Ratio(int batch, SpeculationKind kind) const;

  static constexpr int kBuckets = 5;  // Batches 1, 2-3, 4-7, 8-15, 16+.
  static int Bucket(int batch);

 private:
  struct Sums {
    double tokens = 0, ms = 0, phases = 0;
    void Add(double t, double m, double keep);
    void Scale(double keep);
  };
  struct KindSums {
    Sums speculative;
    double modelled_sum = 0, modelled_steps = 0;
  };
  struct BucketSums {
    Sums plain;
    std::array<KindSums, 3> kinds{};
  };
  RealizedSpeedupOptions options_;
  std::array<BucketSums, kBuckets> buckets_{};
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_REALIZED_SPEEDUP_H_
