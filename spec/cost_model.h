// Cost model of speculative decoding (the per-sequence controller that uses it is
// spec/speculation_controller.h).
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

// The value (expected tokens) a candidate node must exceed to pay for its verify row in
// a step of `k` proposals that commits `rate` tokens per plain step (its modelled
// speedup): adding a node of value v to a step of E tokens at cost C raises E / C iff
// v > (E / C) * (nu(k + 1) - nu(k)). At least 0; 0 when `verify_cost` is empty.
double NodeValueThreshold(double rate, const VerifyCostFn& verify_cost, int k);

// Costs of one deployment. Defaults are illustrative GPU figures (7B draft, 70B
// target); replace them with measured values.
struct CostModel {
  double draft_cost = 0.35;                           // c
  VerifyCostFn verify_cost = LinearVerifyCost(0.01);  // nu(K)
  double overhead = 0.05;                             // o
};

// INVALID_ARGUMENT naming the term when c or o is negative or not finite, verify_cost
// is empty, or nu(K) is not finite and > 0 for some K in [0, max_k].
absl::Status ValidateCostModel(const CostModel& model, int max_k);

// S(alpha, K) with the model's costs, sequential or pipelined; 1 for K <= 0.
double ModelledSpeedup(double alpha, int k, const CostModel& model, bool pipelined);

struct DraftLengthChoice {
  int k = 0;             // 0 only when max_k < 1.
  double speedup = 1.0;  // Modelled speedup at k.
};

// The K in [1, max_k] with the largest modelled speedup (ties to the smaller K), or
// {0, 1} when max_k < 1. The caller decides whether that speedup is worth it.
DraftLengthChoice BestDraftLength(double alpha, const CostModel& model, int max_k, bool pipelined);

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_COST_MODEL_H_
