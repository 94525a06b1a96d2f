#include "spec/acceptance_params.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "spec/sampling.h"

namespace tandem {
namespace spec {
namespace {

constexpr AcceptanceRule kAllRules[] = {AcceptanceRule::kGreedy,    AcceptanceRule::kRejection,
                                        AcceptanceRule::kThreshold, AcceptanceRule::kRatio,
                                        AcceptanceRule::kPosition,  AcceptanceRule::kTypical,
                                        AcceptanceRule::kCoupled};

absl::Status CheckRange(absl::string_view rule, absl::string_view name, float value,
                        const ParamRange& range) {
  if (range.Contains(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("acceptance rule '", rule, "': ", name,
                                                 " must be in ", range.Text(), ", got ", value));
}

}  // namespace

bool ParamRange::Contains(float value) const {
  if (!std::isfinite(value)) return false;
  const bool above = low_inclusive ? value >= low : value > low;
  const bool below = high_inclusive ? value <= high : value < high;
  return above && below;
}

std::string ParamRange::Text() const {
  return absl::StrCat(low_inclusive ? "[" : "(", low, ", ", high, high_inclusive ? "]" : ")");
}

absl::Status ValidateRuleParameters(const AcceptanceParams& params) {
  const absl::string_view name = AcceptanceRuleName(params.rule);
  switch (params.rule) {
    case AcceptanceRule::kGreedy:
    case AcceptanceRule::kRejection:
    case AcceptanceRule::kCoupled:
      return absl::OkStatus();
    case AcceptanceRule::kThreshold:
      return CheckRange(name, "alpha", AlphaOrDefault(params), kThresholdAlphaRange);
    case AcceptanceRule::kRatio:
      return CheckRange(name, "alpha", AlphaOrDefault(params), kRatioAlphaRange);
    case AcceptanceRule::kPosition: {
      absl::Status status =
          CheckRange(name, "theta_first", params.theta_first, kProbabilityParamRange);
      if (!status.ok()) return status;
      return CheckRange(name, "theta_last", params.theta_last, kProbabilityParamRange);
    }
    case AcceptanceRule::kTypical: {
      absl::Status status = CheckRange(name, "epsilon", params.epsilon, kProbabilityParamRange);
      if (!status.ok()) return status;
      return CheckRange(name, "delta", params.delta, kProbabilityParamRange);
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("acceptance: unknown rule value ", static_cast<int>(params.rule)));
}

absl::string_view AcceptanceRuleName(AcceptanceRule rule) {
  switch (rule) {
    case AcceptanceRule::kGreedy:
      return "greedy";
    case AcceptanceRule::kRejection:
      return "rejection";
    case AcceptanceRule::kThreshold:
      return "threshold";
    case AcceptanceRule::kRatio:
      return "ratio";
    case AcceptanceRule::kPosition:
      return "position";
    case AcceptanceRule::kTypical:
      return "typical";
    case AcceptanceRule::kCoupled:
      return "coupled";
  }
  return "unknown";
}

absl::StatusOr<AcceptanceRule> ParseAcceptanceRule(absl::string_view name) {
  for (AcceptanceRule rule : kAllRules) {
    if (AcceptanceRuleName(rule) == name) return rule;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown acceptance rule '", name,
      "'; expected greedy, rejection, threshold, ratio, position, typical or coupled"));
}

float AlphaOrDefault(const AcceptanceParams& params) {
  if (params.alpha.has_value()) return *params.alpha;
  switch (params.rule) {
    case AcceptanceRule::kThreshold:
      return kDefaultThresholdAlpha;
    case AcceptanceRule::kRatio:
      return kDefaultRatioAlpha;
    default:
      return 0.0f;
  }
}

absl::Status ValidateAcceptanceParams(const AcceptanceParams& params, float temperature) {
  absl::Status status = ValidateRuleParameters(params);
  if (!status.ok()) return status;
  if (params.rule == AcceptanceRule::kGreedy && temperature != 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("acceptance rule 'greedy' requires temperature 0, got ", temperature));
  }
  return absl::OkStatus();
}

double PositionThreshold(int i, int k, float theta_first, float theta_last) {
  const double first = theta_first, last = theta_last;
  return first - (static_cast<double>(i) / k) * (first - last);
}

double TypicalThreshold(absl::Span<const float> p, float epsilon, float delta) {
  return std::min(static_cast<double>(epsilon), static_cast<double>(delta) * std::exp(-Entropy(p)));
}

}  // namespace spec
}  // namespace tandem
