#include "client/bench_verdict.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tandem::client {
namespace {

std::vector<double> Finite(const std::vector<double>& values) {
  std::vector<double> out;
  for (double v : values) {
    if (std::isfinite(v)) out.push_back(v);
  }
  return out;
}

}  // namespace

NoiseVerdict CompareWithControl(const std::vector<double>& row_ratios,
                                const std::vector<double>& control_ratios) {
  const std::vector<double> row = Finite(row_ratios), control = Finite(control_ratios);
  if (row.size() < static_cast<size_t>(kMinVerdictRounds) ||
      control.size() < static_cast<size_t>(kMinVerdictRounds)) {
    return NoiseVerdict::kTooFewRounds;
  }
  const auto [row_min, row_max] = std::minmax_element(row.begin(), row.end());
  const auto [control_min, control_max] = std::minmax_element(control.begin(), control.end());
  if (*row_min > *control_max) return NoiseVerdict::kFaster;
  if (*row_max < *control_min) return NoiseVerdict::kSlower;
  return NoiseVerdict::kWithinNoise;
}

std::string VerdictRule() {
  return absl::StrCat(
      "faster: the row's smallest per-round speedup is above the A/A control's largest; "
      "slower: its largest is below the control's smallest; else within noise (no verdict "
      "below ",
      kMinVerdictRounds, " rounds)");
}

std::string VerdictName(NoiseVerdict verdict) {
  switch (verdict) {
    case NoiseVerdict::kFaster:
      return "faster";
    case NoiseVerdict::kSlower:
      return "slower";
    case NoiseVerdict::kWithinNoise:
      return "within noise";
    case NoiseVerdict::kTooFewRounds:
      return "too few rounds";
  }
  return "unknown";
}

double FalseVerdictChance(int n, int m) {
  if (n < 1 || m < 1) return NAN;
  double arrangements = 1;  // C(n + m, n), built up as a product of ratios.
  for (int i = 1; i <= n; ++i) arrangements *= static_cast<double>(m + i) / i;
  return 2 / arrangements;
}

}  // namespace tandem::client
