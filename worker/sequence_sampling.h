// Conversions from the wire form of a sequence's sampling settings
// (tandem.v1.SequenceSampling) to the spec library's types, and the log-probability
// the target reports for a committed token.
#ifndef TANDEM_WORKER_SEQUENCE_SAMPLING_H_
#define TANDEM_WORKER_SEQUENCE_SAMPLING_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "spec/acceptance.h"
#include "spec/sampling.h"
#include "tandem/v1/worker.pb.h"

namespace tandem {
namespace worker {

// temperature / top_k / top_p as given, except top_p 0 (proto3's "unset") which
// means 1 (off). Validate with spec::ValidateSamplingConfig.
spec::SamplingConfig ToSamplingConfig(const v1::SequenceSampling& sampling);

// The acceptance rule and its parameters. A parameter left at 0 (proto3's "unset")
// takes the rule's default (spec/acceptance.h). INVALID_ARGUMENT when the rule is
// ACCEPTANCE_RULE_DEFAULT (requests carry the resolved rule) or unknown, or when
// spec::ValidateAcceptanceParams rejects the parameters for this temperature.
absl::StatusOr<spec::AcceptanceParams> ToAcceptanceParams(const v1::SequenceSampling& sampling);

// True when the sequence decodes greedily (temperature 0).
inline bool IsGreedy(const v1::SequenceSampling& sampling) {
  return !(sampling.temperature() > 0.0f);
}

// Log-probability of `token` reported with a committed token:
//  * sampling (temperature > 0): ln p(token) under the processed distribution `probs`
//    (after temperature, top-k and top-p); -inf when the token has probability 0.
//  * greedy: the processed distribution is one-hot, so the raw model distribution is
//    reported instead: log_softmax(logits)[token] at temperature 1, in double.
double CommittedLogProb(absl::Span<const float> logits, absl::Span<const float> probs,
                        int32_t token, bool greedy);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_SEQUENCE_SAMPLING_H_
