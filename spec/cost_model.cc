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

absl::Status Bad(const char* field, const char* range, double value) {
  return absl::InvalidArgumentError(
      absl::StrCat("adaptive K: ", field, " must be ", range, ", got ", value));
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

absl::Status ValidateAdaptiveKConfig(const AdaptiveKConfig& config) {
  if (config.max_k < 1 || config.max_k > 256) return Bad("max_k", "in [1, 256]", config.max_k);
  if (!NonNegativeFinite(config.cost.draft_cost)) {
    return Bad("draft_cost", "finite and >= 0", config.cost.draft_cost);
  }
  if (!NonNegativeFinite(config.cost.overhead)) {
    return Bad("overhead", "finite and >= 0", config.cost.overhead);
  }
  if (!config.cost.verify_cost) {
    return absl::InvalidArgumentError("adaptive K: verify_cost function is empty");
  }
  for (int k = 0; k <= config.max_k; ++k) {
    const double nu = config.cost.verify_cost(k);
    if (!(nu > 0.0) || !std::isfinite(nu)) {
      return absl::InvalidArgumentError(
          absl::StrCat("adaptive K: verify_cost(", k, ") must be finite and > 0, got ", nu));
    }
  }
  if (!(config.smoothing > 0.0 && config.smoothing <= 1.0)) {
    return Bad("smoothing", "in (0, 1]", config.smoothing);
  }
  if (!(config.initial_acceptance >= 0.0 && config.initial_acceptance <= 1.0)) {
    return Bad("initial_acceptance", "in [0, 1]", config.initial_acceptance);
  }
  if (!(config.min_speedup > 0.0) || !std::isfinite(config.min_speedup)) {
    return Bad("min_speedup", "finite and > 0", config.min_speedup);
  }
  if (config.probe_interval < 0) return Bad("probe_interval", ">= 0", config.probe_interval);
  return absl::OkStatus();
}

AdaptiveK::AdaptiveK(AdaptiveKConfig config) : config_(std::move(config)) {
  config_.max_k = std::max(config_.max_k, 0);
  if (!(config_.smoothing > 0.0 && config_.smoothing <= 1.0)) config_.smoothing = 0.2;
  if (!config_.cost.verify_cost) config_.cost.verify_cost = LinearVerifyCost(0.0);
  // One pseudo-step of prior: initial_acceptance accepted out of one trial.
  average_accepted_ = ClampUnit(config_.initial_acceptance);
  average_trials_ = 1.0;
}

double AdaptiveK::acceptance_estimate() const {
  return ClampUnit(average_accepted_ / average_trials_);
}

int AdaptiveK::NextK() const {
  const DraftLengthChoice best =
      BestDraftLength(acceptance_estimate(), config_.cost, config_.max_k, config_.pipelined);
  if (best.k > 0 && best.speedup >= config_.min_speedup) return best.k;
  if (config_.max_k >= 1 && config_.probe_interval > 0 && plain_steps_ >= config_.probe_interval) {
    return 1;
  }
  return 0;
}

double AdaptiveK::modelled_speedup() const {
  return ModelledSpeedup(acceptance_estimate(), NextK(), config_.cost, config_.pipelined);
}

void AdaptiveK::Observe(int proposed, int accepted) {
  if (proposed <= 0) {
    if (plain_steps_ < config_.probe_interval) ++plain_steps_;
    return;
  }
  plain_steps_ = 0;
  accepted = std::min(std::max(accepted, 0), proposed);
  const int trials = accepted < proposed ? accepted + 1 : accepted;
  const double w = config_.smoothing;
  average_accepted_ = (1.0 - w) * average_accepted_ + w * accepted;
  average_trials_ = (1.0 - w) * average_trials_ + w * trials;
}

}  // namespace spec
}  // namespace tandem
