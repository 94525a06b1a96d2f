#include "spec/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace spec {
namespace {

// Descending weight, ties to the lower index: a strict total order, so sorted
// prefixes are unique and results do not depend on the sort algorithm.
struct MoreLikely {
  const std::vector<double>& weights;
  bool operator()(int a, int b) const {
    if (weights[a] != weights[b]) return weights[a] > weights[b];
    return a < b;
  }
};

bool IsPositiveFinite(double x) { return x > 0.0 && std::isfinite(x); }

template <typename T>
int SampleFromWeights(absl::Span<const T> weights, double u) {
  double total = 0.0;
  int last_positive = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double w = static_cast<double>(weights[i]);
    if (IsPositiveFinite(w)) {
      total += w;
      last_positive = static_cast<int>(i);
    }
  }
  if (last_positive < 0) return -1;
  if (!(u >= 0.0)) u = 0.0;  // Also catches NaN.
  if (u >= 1.0) u = 1.0 - std::numeric_limits<double>::epsilon() / 2;
  const double target = u * total;
  double cumulative = 0.0;
  for (int i = 0; i < last_positive; ++i) {
    const double w = static_cast<double>(weights[i]);
    if (!IsPositiveFinite(w)) continue;
    cumulative += w;
    if (target < cumulative) return i;
  }
  // Either the target falls in the last positive bucket or rounding pushed it past.
  return last_positive;
}

void OneHotAtArgmax(absl::Span<const float> logits, std::vector<float>* probs) {
  const int best = Argmax(logits);
  if (best >= 0) (*probs)[best] = 1.0f;
}

// Zeroes all but the `keep` most likely entries of `weights` listed in `candidates`
// (which is reordered) and shrinks `candidates` to the survivors.
void KeepTopK(size_t keep, std::vector<double>* weights, std::vector<int>* candidates) {
  if (keep >= candidates->size()) return;
  std::nth_element(candidates->begin(), candidates->begin() + keep, candidates->end(),
                   MoreLikely{*weights});
  for (size_t j = keep; j < candidates->size(); ++j) (*weights)[(*candidates)[j]] = 0.0;
  candidates->resize(keep);
}

// Keeps the smallest most-likely prefix of `candidates` whose weight reaches
// top_p of their total (the crossing token included). Sorts progressively larger
// prefixes, so a peaked distribution over a large vocabulary costs little.
void KeepTopP(double top_p, std::vector<double>* weights, std::vector<int>* candidates) {
  double total = 0.0;
  for (int i : *candidates) total += (*weights)[i];
  const double target = top_p * total;
  const MoreLikely more_likely{*weights};
  size_t sorted = 0, kept = 0;
  double cumulative = 0.0;
  bool reached = false;
  while (!reached && kept < candidates->size()) {
    const size_t next = std::min(candidates->size(), std::max<size_t>(64, sorted * 4));
    std::partial_sort(candidates->begin(), candidates->begin() + next, candidates->end(),
                      more_likely);
    sorted = next;
    while (kept < sorted) {
      cumulative += (*weights)[(*candidates)[kept++]];
      if (cumulative >= target) {
        reached = true;
        break;
      }
    }
  }
  for (size_t j = kept; j < candidates->size(); ++j) (*weights)[(*candidates)[j]] = 0.0;
  candidates->resize(kept);
}

}  // namespace

absl::Status ValidateSamplingConfig(const SamplingConfig& config, int vocab_size) {
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling: vocab_size must be positive, got ", vocab_size));
  }
  if (!(config.temperature >= 0.0f && config.temperature <= 100.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampling: temperature must be in [0, 100], got ", config.temperature));
  }
  if (config.top_k < 0 || config.top_k > vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: top_k must be in [0, ",
                                                   vocab_size, "], got ", config.top_k));
  }
  if (!(config.top_p > 0.0f && config.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling: top_p must be in (0, 1], got ", config.top_p));
  }
  return absl::OkStatus();
}

int Argmax(absl::Span<const float> values) {
  int best = -1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) continue;
    if (best < 0 || values[i] > values[best]) best = static_cast<int>(i);
  }
  return best;
}

void ProcessLogits(absl::Span<const float> logits, const SamplingConfig& config,
                   std::vector<float>* probs) {
  const size_t n = logits.size();
  probs->assign(n, 0.0f);
  if (n == 0) return;
  if (!(config.temperature > 0.0f)) {
    OneHotAtArgmax(logits, probs);
    return;
  }

  double max_finite = -std::numeric_limits<double>::infinity();
  bool any_finite = false, any_positive_infinity = false;
  for (float x : logits) {
    if (std::isfinite(x)) {
      any_finite = true;
      max_finite = std::max(max_finite, static_cast<double>(x));
    } else if (x > 0.0f) {
      any_positive_infinity = true;  // +inf (NaN compares false).
    }
  }
  if (!any_finite && !any_positive_infinity) {
    OneHotAtArgmax(logits, probs);
    return;
  }

  std::vector<double> weights(n, 0.0);
  std::vector<int> candidates;
  const double temperature = config.temperature;
  for (size_t i = 0; i < n; ++i) {
    const float x = logits[i];
    double w = 0.0;
    if (any_positive_infinity) {
      w = (std::isinf(x) && x > 0.0f) ? 1.0 : 0.0;
    } else if (std::isfinite(x)) {
      w = std::exp((static_cast<double>(x) - max_finite) / temperature);
    }
    if (w > 0.0) {
      weights[i] = w;
      candidates.push_back(static_cast<int>(i));
    }
  }
  if (candidates.empty()) {  // Only with a non-finite temperature; be safe anyway.
    OneHotAtArgmax(logits, probs);
    return;
  }

  if (config.top_k > 0) KeepTopK(static_cast<size_t>(config.top_k), &weights, &candidates);
  if (config.top_p < 1.0f) KeepTopP(config.top_p, &weights, &candidates);

  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += weights[i];
  for (size_t i = 0; i < n; ++i) (*probs)[i] = static_cast<float>(weights[i] / total);
}

int SampleFromProbs(absl::Span<const float> probs, double u) {
  return SampleFromWeights(probs, u);
}

int SampleFromProbs(absl::Span<const double> weights, double u) {
  return SampleFromWeights(weights, u);
}

SparseDistribution TopKSparse(absl::Span<const float> probs, int k) {
  SparseDistribution result;
  if (k <= 0) return result;
  std::vector<double> weights(probs.size(), 0.0);
  std::vector<int> candidates;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (IsPositiveFinite(probs[i])) {
      weights[i] = probs[i];
      candidates.push_back(static_cast<int>(i));
    }
  }
  const size_t keep = std::min(candidates.size(), static_cast<size_t>(k));
  std::partial_sort(candidates.begin(), candidates.begin() + keep, candidates.end(),
                    MoreLikely{weights});
  double total = 0.0;
  for (size_t j = 0; j < keep; ++j) total += weights[candidates[j]];
  result.ids.reserve(keep);
  result.probs.reserve(keep);
  for (size_t j = 0; j < keep; ++j) {
    result.ids.push_back(candidates[j]);
    result.probs.push_back(static_cast<float>(weights[candidates[j]] / total));
  }
  return result;
}

SparseDistribution PointMass(int32_t token) {
  SparseDistribution result;
  result.ids.push_back(token);
  result.probs.push_back(1.0f);
  return result;
}

float ProbabilityOf(const SparseDistribution& dist, int32_t token) {
  const size_t n = std::min(dist.ids.size(), dist.probs.size());
  for (size_t j = 0; j < n; ++j) {
    if (dist.ids[j] == token) return dist.probs[j];
  }
  return 0.0f;
}

int32_t SampleFromSparse(const SparseDistribution& dist, double u) {
  const size_t n = std::min(dist.ids.size(), dist.probs.size());
  const int j = SampleFromProbs(absl::MakeConstSpan(dist.probs.data(), n), u);
  return j < 0 ? -1 : dist.ids[j];
}

double Entropy(absl::Span<const float> probs) {
  double entropy = 0.0;
  for (float p : probs) {
    if (IsPositiveFinite(p)) entropy -= static_cast<double>(p) * std::log(static_cast<double>(p));
  }
  return entropy;
}

}  // namespace spec
}  // namespace tandem
