// The cost-model terms behind one benchmark row (spec/cost_model.h): acceptance and
// draft length from the requests' own stats, step times from the growth of the
// coordinator's tandem_step_latency_ms histograms over the row's run, and the
// speedup the model predicts from them.
#ifndef TANDEM_CLIENT_COST_TERMS_H_
#define TANDEM_CLIENT_COST_TERMS_H_

#include <cmath>
#include <vector>

#include "client/prometheus_text.h"

namespace tandem::client {

// Mean coordinator-side times per target verify step over one run, in ms; NaN (and
// steps 0) when the metrics were not scraped or no verify step ran.
//   verify_ms   verify call wall time: phases "verify" + "rpc" (compute, collectives
//               and the call's transport)
//   draft_ms    draft compute: phase "draft" (0 for plain decoding)
//   overhead_ms coordinator time outside the calls: phase "overhead", which includes
//               the draft call's transport and prefill-only phases
struct StepTimes {
  double steps = 0;  // Verify steps over the run (histogram count growth).
  double verify_ms = NAN, draft_ms = NAN, overhead_ms = NAN;
};

// StepTimes from two scrapes of /metrics taken before and after a run.
StepTimes StepTimesBetween(const std::vector<PrometheusSample>& before,
                           const std::vector<PrometheusSample>& after);

// The per-token acceptance alpha for which the model's accepted proposals per
// speculative step, E(alpha, k) - 1, equal `accepted_per_step` (bisection on
// spec::ExpectedTokensPerStep, which grows with alpha). 1 when accepted_per_step >= k,
// 0 when <= 0; NaN for k < 1 or a NaN input.
double AcceptanceFromAcceptedPerStep(double accepted_per_step, int k);

// Terms of spec/cost_model.h, all relative to the plain step T = verify_ms of the
// `none` row at the same concurrency and round; K = round(k_mean), at least 1:
//   k_mean = proposed / speculative steps
//   share f = speculative steps / target steps (a proposer may have nothing to offer
//     on some steps, e.g. prompt lookup without a match: those are plain steps)
//   alpha = AcceptanceFromAcceptedPerStep(accepted / speculative steps, K)
//   E = spec::ExpectedTokensPerStep(alpha, K), tokens per speculative step
//   c = draft_ms / (f k_mean T) (draft_ms is per verify step), nu = verify_ms / T,
//   o = (overhead_ms - overhead_ms of `none`) / T (the coordinator time speculation
//     adds; noise can make it slightly negative)
//   predicted_speedup = spec::SequentialSpeedup(alpha, K, f c, nu, o) * (f E + 1 - f) / E:
//     the model's E / (K c + nu + o) with the plain steps mixed in (f = 1: exactly S).
// Fields that cannot be computed are NaN.
struct CostTerms {
  double alpha = NAN, k_mean = NAN, speculative_share = NAN;
  double draft_cost = NAN, verify_cost = NAN, overhead = NAN;  // c, nu, o
  double expected_tokens = NAN, predicted_speedup = NAN;       // E, S
};

// alpha, k_mean, the share and E from pooled request stats (counts over the run).
CostTerms AcceptanceTerms(long long proposed, long long accepted, long long speculative_steps,
                          long long target_steps);

// Adds c, nu, o and S to `terms` (from AcceptanceTerms) given this row's and the
// `none` row's step times. Leaves the time terms NaN when either has no steps.
void AddTimeTerms(const StepTimes& row, const StepTimes& none, CostTerms* terms);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COST_TERMS_H_
