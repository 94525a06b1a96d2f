// Cost model of speculative decoding and an adaptive draft-length controller.
//
// Units: every time is relative to one target decoding step (one position).
//   alpha  per-token acceptance rate, [0, 1]
//   K      draft length (proposals per step)
//   c      T(draft one token) / T(target step)
//   nu(K)  T(target verify of K+1 positions) / T(target step); nu(0) = 1
//   o      coordinator + RPC overhead per step / T(target step)
// Tokens committed per step  E = (1 - alpha^(K+1)) / (1 - alpha)   (K + 1 at alpha = 1)
// Sequential speedup         S = E / (K c + nu(K) + o)
// Pipelined (perfect overlap) S <= E / (max(nu(K), K c) + o)
// Speedups are relative to plain decoding, whose speedup is 1 by definition (K = 0).
// Pure and deterministic; no I/O.
#ifndef TANDEM_SPEC_COST_MODEL_H_
#define TANDEM_SPEC_COST_MODEL_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"

namespace tandem {
namespace spec {

// E(alpha, K) as sum_{j=0..K} alpha^j (stable near alpha = 1). alpha is clamped to
// [0, 1] (NaN counts as 0), K < 0 counts as 0.
double ExpectedTokensPerStep(double alpha, int k);

// S for one K with scalar costs; 1 for K <= 0.
double SequentialSpeedup(double alpha, int k, double draft_cost, double verify_cost,
                         double overhead);
// The pipelined upper bound for one K with scalar costs; 1 for K <= 0.
double PipelinedSpeedupBound(double alpha, int k, double draft_cost, double verify_cost,
                             double overhead);

// nu(K) as a function of K >= 0.
using VerifyCostFn = std::function<double(int k)>;

// nu(K) = 1 + slope * K (a memory-bound GPU verify has a small slope).
VerifyCostFn LinearVerifyCost(double slope);
// nu(K) = nu_by_k[K] from measurements (nu_by_k[0] is normally 1). Past the end it
// extends the last segment linearly (flat with a single entry); empty means nu = 1.
VerifyCostFn TableVerifyCost(std::vector<double> nu_by_k);

// Costs of one deployment. Defaults are illustrative GPU figures (7B draft, 70B
// target); replace them with measured values.
struct CostModel {
  double draft_cost = 0.35;                           // c
  VerifyCostFn verify_cost = LinearVerifyCost(0.01);  // nu(K)
  double overhead = 0.05;                             // o
};

// S(alpha, K) with the model's costs, sequential or pipelined; 1 for K <= 0.
double ModelledSpeedup(double alpha, int k, const CostModel& model, bool pipelined);

struct DraftLengthChoice {
  int k = 0;             // 0 only when max_k < 1.
  double speedup = 1.0;  // Modelled speedup at k.
};

// The K in [1, max_k] with the largest modelled speedup (ties to the smaller K), or
// {0, 1} when max_k < 1. The caller decides whether that speedup is worth it.
DraftLengthChoice BestDraftLength(double alpha, const CostModel& model, int max_k, bool pipelined);

struct AdaptiveKConfig {
  int max_k = 8;  // [1, 256]
  CostModel cost;
  bool pipelined = false;           // Optimise the pipelined bound instead of S.
  double smoothing = 0.2;           // (0, 1]: weight of the newest step in the averages.
  double initial_acceptance = 0.6;  // [0, 1]: alpha assumed before any observation.
  double min_speedup = 1.0;         // > 0: speculate only when the best S reaches this.
  // While speculation is off, every probe_interval-th consecutive plain step runs
  // K = 1 to re-measure alpha; 0 = never probe (off stays off until alpha changes).
  int probe_interval = 16;
};

// INVALID_ARGUMENT naming the field when a value is outside the ranges above, a cost
// is negative or not finite, or verify_cost is empty.
absl::Status ValidateAdaptiveKConfig(const AdaptiveKConfig& config);

// Per-sequence draft-length controller. Each step: K = NextK(), run the step, then
// Observe(K proposed, accepted). It keeps exponential moving averages of accepted
// proposals and of acceptance *trials* per step (a step stops at its first rejection,
// so it tried accepted + 1 proposals, or all K when all passed) and estimates
// alpha = avg(accepted) / avg(trials), which is unbiased for the per-token rate of the
// model; accepted / proposed would understate alpha for K > 1. Deterministic.
// The config is assumed valid (see ValidateAdaptiveKConfig); values out of range are
// clamped rather than trusted. Not thread-safe: one instance per sequence.
class AdaptiveK {
 public:
  explicit AdaptiveK(AdaptiveKConfig config = AdaptiveKConfig());

  // Draft length for the next step: the best K for the current alpha estimate, or 0
  // (speculation off) when its modelled speedup is below min_speedup, except for a
  // K = 1 probe after probe_interval consecutive plain steps.
  int NextK() const;

  // Records a finished step: `proposed` proposals, `accepted` of them accepted
  // (clamped to [0, proposed]). A plain step (proposed <= 0) only counts towards the
  // next probe.
  void Observe(int proposed, int accepted);

  // Current per-token acceptance estimate, [0, 1].
  double acceptance_estimate() const;
  // Modelled speedup of NextK() at the current estimate (1 when off).
  double modelled_speedup() const;

  // Replaces the cost model (e.g. with one fitted to measured step times); the
  // acceptance estimate is kept.
  void SetCostModel(const CostModel& cost) { config_.cost = cost; }

 private:
  AdaptiveKConfig config_;
  double average_accepted_;
  double average_trials_;
  int plain_steps_ = 0;
};

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_COST_MODEL_H_
