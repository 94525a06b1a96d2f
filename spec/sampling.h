// Sampling transforms: temperature, top-k and top-p processing of logits into the
// distribution a token is drawn from, inverse-CDF sampling, sparse top-k proposal
// distributions and entropy. Pure functions, no I/O.
#ifndef TANDEM_SPEC_SAMPLING_H_
#define TANDEM_SPEC_SAMPLING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tandem {
namespace spec {

// Per-request sampling configuration.
struct SamplingConfig {
  float temperature = 0.0f;  // [0, 100]; 0 = greedy (one-hot at the argmax).
  int top_k = 0;             // [0, vocab]; 0 = off.
  float top_p = 1.0f;        // (0, 1]; 1 = off.
};

// OK when temperature is finite in [0, 100], top_k in [0, vocab_size] and top_p in
// (0, 1]; INVALID_ARGUMENT naming the field and its value otherwise.
absl::Status ValidateSamplingConfig(const SamplingConfig& config, int vocab_size);

// Index of the largest value; ties go to the lowest index; NaN entries are skipped
// (-inf counts as a value). -1 when `values` is empty or all NaN.
int Argmax(absl::Span<const float> values);

// Writes the processed distribution p over the vocabulary into *probs (resized to
// logits.size(); `probs` must not be null):
//  * temperature 0: one-hot at Argmax(logits);
//  * otherwise softmax(logits / temperature) in double with max subtraction, then
//    top-k (the k largest, ties to the lower index), then top-p (the smallest set of
//    most likely tokens, taken in descending probability with ties to the lower
//    index, whose mass reaches top_p; the token that crosses is included), then
//    renormalised to sum 1. Removed tokens get exactly 0.
// Robust to bad input (never crashes): NaN logits get probability 0; +inf logits
// share the mass evenly; when no logit is finite or +inf the result is one-hot at
// Argmax (all zeros if every logit is NaN). Out-of-range settings are clamped:
// temperature < 0 or NaN means greedy, top_k < 0 or >= vocab means off, top_p >= 1
// (or NaN) means off, top_p <= 0 keeps the single most likely token.
void ProcessLogits(absl::Span<const float> logits, const SamplingConfig& config,
                   std::vector<float>* probs);

// Inverse-CDF sample from non-negative weights (need not sum to 1; negative or
// non-finite entries count as 0) with uniform u in [0, 1) (clamped into it): returns
// the first index i, in index order, whose cumulative weight exceeds u * total.
// Never returns an index of zero weight; u close to 1 returns the last positive-
// weight index despite rounding. -1 when no weight is positive.
int SampleFromProbs(absl::Span<const float> probs, double u);
int SampleFromProbs(absl::Span<const double> weights, double u);

// Gumbel-max sample from the processed distribution `probs` at absolute sequence
// position `position` of a request with seed `seed`: argmax over the tokens v with
// probs[v] > 0 (finite) of ln probs[v] + GumbelNoise(seed, position, v) (spec/rng.h),
// computed (here and on every backend) as the argmax of the same order,
// probs[v] / -ln u(v) in double, u(v) = UniformDouble(seed, kGumbel, position, v);
// ties to the lower index; distributed exactly as `probs`. -1 when no entry is positive.
// The sample of the coupled acceptance rule (spec/acceptance.h).
int GumbelSample(absl::Span<const float> probs, uint64_t seed, uint64_t position);

// A distribution on a subset of the vocabulary: probs[j] is the probability of token
// ids[j]; all other tokens have probability 0. Ids are distinct.
struct SparseDistribution {
  std::vector<int32_t> ids;
  std::vector<float> probs;
};

// The (at most) k most likely tokens of `probs` with positive probability, ordered by
// descending probability (ties to the lower id), renormalised to sum 1. Empty when
// k <= 0 or no entry is positive. Used as the draft's exact sparse proposal q.
SparseDistribution TopKSparse(absl::Span<const float> probs, int k);

// Point mass on `token` (probability 1): the proposal of a deterministic proposer.
SparseDistribution PointMass(int32_t token);

// `q` with `token` removed and the rest renormalised to sum 1 (order kept); empty when
// nothing with positive probability is left. The q a later sibling of a tree is drawn
// from under rejection sampling without replacement (spec/tree_acceptance.h).
SparseDistribution SparseWithout(const SparseDistribution& q, int32_t token);

// Probability of `token` in `dist`; 0 when absent.
float ProbabilityOf(const SparseDistribution& dist, int32_t token);

// Samples a token id from `dist` with uniform u in [0, 1); -1 when `dist` has no
// positive probability.
int32_t SampleFromSparse(const SparseDistribution& dist, double u);

// Shannon entropy -sum p ln p in nats (terms with p <= 0 or non-finite skipped),
// computed in double. `probs` is taken as given (expected to sum to 1).
double Entropy(absl::Span<const float> probs);

// Log-probability reported with a committed `token` drawn from one logit row:
//  * sampling (greedy false): ln probs[token] under the processed distribution `probs`
//    (after temperature, top-k and top-p); -inf when it is 0.
//  * greedy: the processed distribution is one-hot, so the raw model distribution is
//    reported instead: log_softmax(logits)[token] at temperature 1, in double, over the
//    finite logits (-inf for a non-finite logit or a row without finite logits).
// -inf for a token outside [0, logits.size()).
double CommittedLogProb(absl::Span<const float> logits, absl::Span<const float> probs,
                        int32_t token, bool greedy);

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_SAMPLING_H_
