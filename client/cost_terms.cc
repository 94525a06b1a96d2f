#include "client/cost_terms.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "spec/cost_model.h"

namespace tandem::client {
namespace {

// Growth of tandem_step_latency_ms_{sum,count}{phase} between the scrapes.
struct PhaseGrowth {
  double sum = NAN, count = NAN;
};

PhaseGrowth Growth(const std::vector<PrometheusSample>& before,
                   const std::vector<PrometheusSample>& after, const char* phase) {
  PhaseGrowth g;
  const std::map<std::string, std::string> labels = {{"phase", phase}};
  std::optional<double> sum = FindSample(after, "tandem_step_latency_ms_sum", labels);
  std::optional<double> count = FindSample(after, "tandem_step_latency_ms_count", labels);
  if (!sum.has_value() || !count.has_value()) return g;
  g.sum = *sum - FindSample(before, "tandem_step_latency_ms_sum", labels).value_or(0);
  g.count = *count - FindSample(before, "tandem_step_latency_ms_count", labels).value_or(0);
  return g;
}

int RoundedK(double k_mean) { return std::max(1, static_cast<int>(std::lround(k_mean))); }

}  // namespace

StepTimes StepTimesBetween(const std::vector<PrometheusSample>& before,
                           const std::vector<PrometheusSample>& after) {
  StepTimes t;
  const PhaseGrowth verify = Growth(before, after, "verify");
  if (!(verify.count > 0)) return t;
  const PhaseGrowth rpc = Growth(before, after, "rpc");
  const PhaseGrowth draft = Growth(before, after, "draft");
  const PhaseGrowth overhead = Growth(before, after, "overhead");
  t.steps = verify.count;
  t.verify_ms = (verify.sum + (std::isnan(rpc.sum) ? 0 : rpc.sum)) / verify.count;
  t.draft_ms = (std::isnan(draft.sum) ? 0 : draft.sum) / verify.count;
  t.overhead_ms = std::isnan(overhead.sum) ? NAN : overhead.sum / verify.count;
  return t;
}

double AcceptanceFromAcceptedPerStep(double accepted_per_step, int k) {
  if (k < 1 || std::isnan(accepted_per_step)) return NAN;
  if (accepted_per_step <= 0) return 0;
  if (accepted_per_step >= k) return 1;
  double lo = 0, hi = 1;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (spec::ExpectedTokensPerStep(mid, k) - 1 < accepted_per_step ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

CostTerms AcceptanceTerms(long long proposed, long long accepted, long long speculative_steps,
                          long long target_steps) {
  CostTerms terms;
  if (speculative_steps <= 0 || proposed <= 0) return terms;
  const int k = RoundedK(static_cast<double>(proposed) / speculative_steps);
  terms.k_mean = static_cast<double>(proposed) / speculative_steps;
  terms.speculative_share =
      std::min(1.0, static_cast<double>(speculative_steps) /
                        static_cast<double>(std::max(target_steps, speculative_steps)));
  terms.alpha = AcceptanceFromAcceptedPerStep(static_cast<double>(accepted) / speculative_steps, k);
  terms.expected_tokens = spec::ExpectedTokensPerStep(terms.alpha, k);
  return terms;
}

void AddTimeTerms(const StepTimes& row, const StepTimes& none, CostTerms* terms) {
  if (std::isnan(terms->k_mean) || !(row.steps > 0) || !(none.steps > 0) || !(none.verify_ms > 0)) {
    return;
  }
  const double t = none.verify_ms, f = terms->speculative_share;
  const int k = RoundedK(terms->k_mean);
  terms->draft_cost = row.draft_ms / (f * terms->k_mean * t);
  terms->verify_cost = row.verify_ms / t;
  terms->overhead = (row.overhead_ms - none.overhead_ms) / t;
  if (!std::isfinite(terms->overhead)) return;
  const double e = terms->expected_tokens;
  terms->predicted_speedup = spec::SequentialSpeedup(terms->alpha, k, f * terms->draft_cost,
                                                     terms->verify_cost, terms->overhead) *
                             (f * e + 1 - f) / e;
}

}  // namespace tandem::client
