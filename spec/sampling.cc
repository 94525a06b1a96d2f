#include "spec/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "spec/philox.h"

namespace tandem {
namespace spec {
namespace {

bool IsPositiveFinite(double x) { return x > 0.0 && std::isfinite(x); }

// Indices of the (at most) `m` largest positive finite entries of `weights`, most
// likely first; ties go to the lower index, a strict total order, so the result does
// not depend on the algorithm. One pass with a bounded heap: O(n log m).
template <typename T>
std::vector<int> TopIndices(absl::Span<const T> weights, size_t m) {
  const auto more_likely = [&weights](int a, int b) {
    if (weights[a] != weights[b]) return weights[a] > weights[b];
    return a < b;
  };
  std::vector<int> heap;  // Front: the least likely index kept so far.
  if (m == 0) return heap;
  heap.reserve(std::min(m, weights.size()));
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!IsPositiveFinite(static_cast<double>(weights[i]))) continue;
    const int index = static_cast<int>(i);
    if (heap.size() < m) {
      heap.push_back(index);
      std::push_heap(heap.begin(), heap.end(), more_likely);
    } else if (more_likely(index, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), more_likely);
      heap.back() = index;
      std::push_heap(heap.begin(), heap.end(), more_likely);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), more_likely);
  return heap;
}

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

// Zeroes every weight except those at `kept`.
void KeepOnly(const std::vector<int>& kept, std::vector<double>* weights) {
  std::vector<double> filtered(weights->size(), 0.0);
  for (int i : kept) filtered[i] = (*weights)[i];
  weights->swap(filtered);
}

// Keeps the `top_k` most likely entries.
void KeepTopK(size_t top_k, std::vector<double>* weights) {
  KeepOnly(TopIndices(absl::MakeConstSpan(*weights), top_k), weights);
}

// Keeps the smallest most-likely set whose weight reaches top_p of the total (the
// crossing token included). Selects progressively larger candidate sets, so a peaked
// distribution over a large vocabulary costs about one pass.
void KeepTopP(double top_p, std::vector<double>* weights) {
  double total = 0.0;
  size_t positive = 0;
  for (double w : *weights) {
    total += w;
    positive += w > 0.0;
  }
  const double target = top_p * total;
  for (size_t m = 64;; m *= 4) {
    const std::vector<int> best = TopIndices(absl::MakeConstSpan(*weights), m);
    double cumulative = 0.0;
    for (size_t j = 0; j < best.size(); ++j) {
      cumulative += (*weights)[best[j]];
      if (cumulative >= target) {
        KeepOnly(std::vector<int>(best.begin(), best.begin() + j + 1), weights);
        return;
      }
    }
    if (best.size() >= positive) return;  // Rounding: the whole support is needed.
  }
}

}  // namespace

absl::Status ValidateSamplingConfig(const SamplingConfig& config, int vocab_size) {
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling: vocab_size must be positive, got ", vocab_size));
  }
  if (!(config.temperature >= 0.0f && config.temperature <= 100.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling: temperature must be in [0, 100], got ", config.temperature));
  }
  if (config.top_k < 0 || config.top_k > vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling: top_k must be in [0, ", vocab_size, "], got ", config.top_k));
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
  bool any_weight = false;
  const double temperature = config.temperature;
  for (size_t i = 0; i < n; ++i) {
    const float x = logits[i];
    double w = 0.0;
    if (any_positive_infinity) {
      w = (std::isinf(x) && x > 0.0f) ? 1.0 : 0.0;
    } else if (std::isfinite(x)) {
      w = std::exp((static_cast<double>(x) - max_finite) / temperature);
    }
    weights[i] = w;
    any_weight = any_weight || w > 0.0;
  }
  if (!any_weight) {  // Only with a non-finite temperature; be safe anyway.
    OneHotAtArgmax(logits, probs);
    return;
  }

  if (config.top_k > 0 && static_cast<size_t>(config.top_k) < n) {
    KeepTopK(static_cast<size_t>(config.top_k), &weights);
  }
  if (config.top_p < 1.0f) KeepTopP(config.top_p, &weights);

  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += weights[i];
  for (size_t i = 0; i < n; ++i) (*probs)[i] = static_cast<float>(weights[i] / total);
}

int SampleFromProbs(absl::Span<const float> probs, double u) { return SampleFromWeights(probs, u); }

int SampleFromProbs(absl::Span<const double> weights, double u) {
  return SampleFromWeights(weights, u);
}

int GumbelSample(absl::Span<const float> probs, uint64_t seed, uint64_t position) {
  int best = -1;
  double best_score = 0.0;
  for (size_t v = 0; v < probs.size(); ++v) {
    const double score = philox::GumbelScore(probs[v], seed, position, static_cast<uint32_t>(v));
    if (std::isnan(score)) continue;
    if (best < 0 || score > best_score) {
      best = static_cast<int>(v);
      best_score = score;
    }
  }
  return best;
}

SparseDistribution TopKSparse(absl::Span<const float> probs, int k) {
  SparseDistribution result;
  if (k <= 0) return result;
  const std::vector<int> best = TopIndices(probs, static_cast<size_t>(k));
  double total = 0.0;
  for (int i : best) total += probs[i];
  result.ids.assign(best.begin(), best.end());
  result.probs.reserve(best.size());
  for (int i : best) result.probs.push_back(static_cast<float>(probs[i] / total));
  return result;
}

SparseDistribution PointMass(int32_t token) {
  SparseDistribution result;
  result.ids.push_back(token);
  result.probs.push_back(1.0f);
  return result;
}

SparseDistribution SparseWithout(const SparseDistribution& q, int32_t token) {
  SparseDistribution out;
  double total = 0.0;
  for (size_t j = 0; j < q.ids.size() && j < q.probs.size(); ++j) {
    if (q.ids[j] == token) continue;
    out.ids.push_back(q.ids[j]);
    out.probs.push_back(q.probs[j]);
    total += q.probs[j];
  }
  if (!(total > 0.0)) return {};
  for (float& p : out.probs) p = static_cast<float>(p / total);
  return out;
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

double CommittedLogProb(absl::Span<const float> logits, absl::Span<const float> probs,
                        int32_t token, bool greedy) {
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) {
    return -std::numeric_limits<double>::infinity();
  }
  if (!greedy) {
    const float p = probs[token];
    return p > 0.0f ? std::log(static_cast<double>(p)) : -std::numeric_limits<double>::infinity();
  }
  double max = -std::numeric_limits<double>::infinity();
  for (float x : logits) {
    if (std::isfinite(x) && x > max) max = x;
  }
  if (!std::isfinite(max)) return -std::numeric_limits<double>::infinity();
  double sum = 0;
  for (float x : logits) {
    if (std::isfinite(x)) sum += std::exp(static_cast<double>(x) - max);
  }
  const double value = logits[token];
  if (!std::isfinite(value)) return -std::numeric_limits<double>::infinity();
  return value - max - std::log(sum);
}

}  // namespace spec
}  // namespace tandem
