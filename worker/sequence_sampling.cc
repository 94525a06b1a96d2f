#include "worker/sequence_sampling.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace worker {

spec::SamplingConfig ToSamplingConfig(const v1::SequenceSampling& sampling) {
  spec::SamplingConfig config;
  config.temperature = sampling.temperature();
  config.top_k = sampling.top_k();
  // proto3 cannot tell an unset top_p from 0, and 0 is no valid mass: 0 means off.
  config.top_p = sampling.top_p() == 0.0f ? 1.0f : sampling.top_p();
  return config;
}

spec::Proposal ToProposal(const v1::ProposedToken& proposal) {
  spec::Proposal out;
  out.token = proposal.token();
  out.q.ids.assign(proposal.q_ids().begin(), proposal.q_ids().end());
  out.q.probs.assign(proposal.q_probs().begin(), proposal.q_probs().end());
  return out;
}

absl::StatusOr<spec::AcceptanceParams> ToAcceptanceParams(const v1::SequenceSampling& sampling) {
  spec::AcceptanceParams params;
  switch (sampling.rule()) {
    case v1::ACCEPTANCE_RULE_GREEDY:
      params.rule = spec::AcceptanceRule::kGreedy;
      break;
    case v1::ACCEPTANCE_RULE_REJECTION:
      params.rule = spec::AcceptanceRule::kRejection;
      break;
    case v1::ACCEPTANCE_RULE_THRESHOLD:
      params.rule = spec::AcceptanceRule::kThreshold;
      break;
    case v1::ACCEPTANCE_RULE_RATIO:
      params.rule = spec::AcceptanceRule::kRatio;
      break;
    case v1::ACCEPTANCE_RULE_POSITION:
      params.rule = spec::AcceptanceRule::kPosition;
      break;
    case v1::ACCEPTANCE_RULE_TYPICAL:
      params.rule = spec::AcceptanceRule::kTypical;
      break;
    case v1::ACCEPTANCE_RULE_COUPLED:
      params.rule = spec::AcceptanceRule::kCoupled;
      break;
    case v1::ACCEPTANCE_RULE_DEFAULT:
      return absl::InvalidArgumentError(
          "sampling.rule is ACCEPTANCE_RULE_DEFAULT; workers need the resolved rule");
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("sampling.rule has unknown value ", static_cast<int>(sampling.rule())));
  }
  if (sampling.alpha() != 0.0f) params.alpha = sampling.alpha();
  if (sampling.theta_first() != 0.0f) params.theta_first = sampling.theta_first();
  if (sampling.theta_last() != 0.0f) params.theta_last = sampling.theta_last();
  if (sampling.epsilon() != 0.0f) params.epsilon = sampling.epsilon();
  if (sampling.delta() != 0.0f) params.delta = sampling.delta();
  absl::Status status = spec::ValidateAcceptanceParams(params, sampling.temperature());
  if (!status.ok()) return status;
  return params;
}

int AcceptableProposals(const v1::VerifySequence& seq) {
  if (!seq.has_num_acceptable()) return seq.proposals_size();
  return std::min<int>(seq.num_acceptable(), seq.proposals_size());
}

}  // namespace worker
}  // namespace tandem
