// Conversions from the wire form of a sequence's sampling settings
// (tandem.v1.SequenceSampling) and proposals (tandem.v1.ProposedToken) to the spec
// library's types.
#ifndef TANDEM_WORKER_SEQUENCE_SAMPLING_H_
#define TANDEM_WORKER_SEQUENCE_SAMPLING_H_

#include "absl/status/statusor.h"
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

// A proposed token and its sparse proposal distribution q, as given.
spec::Proposal ToProposal(const v1::ProposedToken& proposal);

// True when the sequence decodes greedily (temperature 0).
inline bool IsGreedy(const v1::SequenceSampling& sampling) {
  return !(sampling.temperature() > 0.0f);
}

// The proposals acceptance may accept: [0, this) (VerifySequence.num_acceptable, all
// when unset, capped at proposals_size()). The rest are computed only: their logit rows
// are in the pass, they are never accepted and always rolled back.
int AcceptableProposals(const v1::VerifySequence& seq);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_SEQUENCE_SAMPLING_H_
