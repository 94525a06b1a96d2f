// The acceptance rules of speculative decoding by name, their parameters with
// defaults and range checks, and the per-proposal thresholds of the position and
// typical rules (spec/acceptance.h applies the rules).
#ifndef TANDEM_SPEC_ACCEPTANCE_PARAMS_H_
#define TANDEM_SPEC_ACCEPTANCE_PARAMS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tandem {
namespace spec {

enum class AcceptanceRule {
  kGreedy,
  kRejection,
  kThreshold,
  kRatio,
  kPosition,
  kTypical,
  kCoupled
};

// Lower-case rule name ("greedy", "rejection", "threshold", "ratio", "position",
// "typical", "coupled"), and its inverse (INVALID_ARGUMENT listing the valid names).
absl::string_view AcceptanceRuleName(AcceptanceRule rule);
absl::StatusOr<AcceptanceRule> ParseAcceptanceRule(absl::string_view name);

// Rule parameters with their defaults.
constexpr float kDefaultThresholdAlpha = 0.3f;
constexpr float kDefaultRatioAlpha = 0.5f;
constexpr float kDefaultThetaFirst = 0.95f;
constexpr float kDefaultThetaLast = 0.70f;
constexpr float kDefaultEpsilon = 0.09f;
constexpr float kDefaultDelta = 0.3f;

// The allowed values of a rule parameter: an interval of the reals (never NaN or inf).
struct ParamRange {
  float low;
  bool low_inclusive;
  float high;
  bool high_inclusive;
  bool Contains(float value) const;  // False for NaN and infinities.
  std::string Text() const;          // "(0, 1]".
};
inline constexpr ParamRange kThresholdAlphaRange{0.0f, false, 1.0f, false};  // (0, 1)
inline constexpr ParamRange kRatioAlphaRange{0.0f, false, 1.0f, true};       // (0, 1]
// theta_first, theta_last (position) and epsilon, delta (typical).
inline constexpr ParamRange kProbabilityParamRange{0.0f, false, 1.0f, true};  // (0, 1]

struct AcceptanceParams {
  AcceptanceRule rule = AcceptanceRule::kRejection;
  // threshold: (0, 1), default 0.3; ratio: (0, 1], default 0.5. Unset = the rule's
  // default (see AlphaOrDefault).
  std::optional<float> alpha;
  float theta_first = kDefaultThetaFirst;  // position: (0, 1].
  float theta_last = kDefaultThetaLast;    // position: (0, 1]; no order required.
  float epsilon = kDefaultEpsilon;         // typical: (0, 1].
  float delta = kDefaultDelta;             // typical: (0, 1].
};

// `params.alpha` if set, else the default of `params.rule` (0.3 threshold, 0.5 ratio,
// 0 for rules without alpha).
float AlphaOrDefault(const AcceptanceParams& params);

// Checks the parameters `params.rule` reads (others are ignored) against the ranges
// above; INVALID_ARGUMENT naming the parameter, its value and the allowed range.
absl::Status ValidateRuleParameters(const AcceptanceParams& params);

// ValidateRuleParameters, and that greedy is used only with temperature 0.
// Checks the parameters `params.rule` reads (others are ignored) against the ranges
// above, and that greedy is used only with temperature 0. INVALID_ARGUMENT naming the
// parameter, its value and the allowed range otherwise.
absl::Status ValidateAcceptanceParams(const AcceptanceParams& params, float temperature);

// theta_i of the position rule for proposal i in [1, k], k >= 1, in double.
double PositionThreshold(int i, int k, float theta_first, float theta_last);

// min(epsilon, delta * exp(-Entropy(p))) of the typical rule, in double.
double TypicalThreshold(absl::Span<const float> p, float epsilon, float delta);

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_ACCEPTANCE_PARAMS_H_
