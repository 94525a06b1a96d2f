#include "spec/cost_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace spec {
namespace {

double ClampUnit(double x) {
  if (!(x >= 0.0)) return 0.0;  // Also NaN.
  return std::min(x, 1.0);
}

bool NonNegativeFinite(double x) { return x >= 0.0 && std::isfinite(x); }

}  // namespace

double ExpectedTokensPerStep(double alpha, int k) {
  alpha = ClampUnit(alpha);
  double expected = 0.0, power = 1.0;
  for (int j = 0; j <= std::max(k, 0); ++j) {
    expected += power;
    power *= alpha;
  }
  return expected;
}

double SequentialSpeedup(double alpha, int k, double draft_cost, double verify_cost,
                         double overhead) {
  if (k <= 0) return 1.0;
  return ExpectedTokensPerStep(alpha, k) / (k * draft_cost + verify_cost + overhead);
}

double PipelinedSpeedupBound(double alpha, int k, double draft_cost, double verify_cost,
                             double overhead) {
  if (k <= 0) return 1.0;
  return ExpectedTokensPerStep(alpha, k) / (std::max(verify_cost, k * draft_cost) + overhead);
}

double NodeValueThreshold(double rate, const VerifyCostFn& verify_cost, int k) {
  if (!verify_cost) return 0;
  return std::max(0.0, rate * (verify_cost(k + 1) - verify_cost(k)));
}

VerifyCostFn LinearVerifyCost(double slope) {
  return [slope](int k) { return 1.0 + slope * std::max(k, 0); };
}

VerifyCostFn TableVerifyCost(std::vector<double> nu_by_k) {
  return [table = std::move(nu_by_k)](int k) {
    if (table.empty()) return 1.0;
    k = std::max(k, 0);
    const int last = static_cast<int>(table.size()) - 1;
    if (k <= last) return table[k];
    const double slope = last > 0 ? table[last] - table[last - 1] : 0.0;
    return table[last] + slope * (k - last);
  };
}

double ModelledSpeedup(double alpha, int k, const CostModel& model, bool pipelined) {
  if (k <= 0) return 1.0;
  const double nu = model.verify_cost ? model.verify_cost(k) : 1.0;
  return pipelined ? PipelinedSpeedupBound(alpha, k, model.draft_cost, nu, model.overhead)
                   : SequentialSpeedup(alpha, k, model.draft_cost, nu, model.overhead);
}

DraftLengthChoice BestDraftLength(double alpha, const CostModel& model, int max_k, bool pipelined) {
  DraftLengthChoice best;
  for (int k = 1; k <= max_k; ++k) {
    const double speedup = ModelledSpeedup(alpha, k, model, pipelined);
    if (best.k == 0 || speedup > best.speedup) best = {k, speedup};
  }
  return best;
}

absl::Status ValidateCostModel(const CostModel& model, int max_k) {
  if (!NonNegativeFinite(model.draft_cost)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost model: draft_cost must be finite and >= 0, got ", model.draft_cost));
  }
  if (!NonNegativeFinite(model.overhead)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost model: overhead must be finite and >= 0, got ", model.overhead));
  }
  if (!model.verify_cost) return absl::InvalidArgumentError("cost model: verify_cost is empty");
  for (int k = 0; k <= max_k; ++k) {
    const double nu = model.verify_cost(k);
    if (!(nu > 0.0) || !std::isfinite(nu)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cost model: verify_cost(", k, ") must be finite and > 0, got ", nu));
    }
  }
  return absl::OkStatus();
}

}  // namespace spec
}  // namespace tandem
