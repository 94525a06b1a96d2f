#include "spec/acceptance.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "spec/rng.h"

namespace tandem {
namespace spec {
namespace {

constexpr double kProposalSumTolerance = 1e-3;

absl::Status ValidateInputs(absl::Span<const Proposal> proposals,
                            absl::Span<const absl::Span<const float>> target_probs,
                            AcceptanceRule rule) {
  const size_t k = proposals.size();
  absl::Status status = ValidateTargetDistributions(target_probs, k);
  if (!status.ok()) return status;
  const size_t vocab = target_probs[0].size();
  for (size_t i = 0; i < k; ++i) {
    const int32_t token = proposals[i].token;
    if (token < 0 || static_cast<size_t>(token) >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("acceptance: proposal ", i, " token ", token, " outside [0, ", vocab, ")"));
    }
    if (RuleReadsProposalDistribution(rule)) {
      status = ValidateProposalDistribution(
          proposals[i], vocab, absl::StrCat("acceptance: proposal ", i, " (token ", token, "): "));
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

absl::Status NoMassError(size_t index) {
  return absl::InvalidArgumentError(
      absl::StrCat("acceptance: target distribution ", index, " has no positive probability"));
}

// EmitToken, or NoMassError(index) when p has no positive entry.
absl::StatusOr<int32_t> EmitOrError(absl::Span<const float> p, size_t index, EmitMode how,
                                    const RandomKey& key, uint64_t offset) {
  const int32_t token = EmitToken(p, how, key, offset);
  if (token < 0) return NoMassError(index);
  return token;
}

// Correction of the rejection rule: a sample from normalize(max(0, p - q)), or from p
// when that residual has no mass.
absl::StatusOr<int32_t> SampleResidual(absl::Span<const float> p, const SparseDistribution& q,
                                       size_t index, uint64_t seed, uint64_t position) {
  std::vector<double> residual(p.begin(), p.end());
  for (size_t j = 0; j < q.ids.size(); ++j) {
    const int32_t id = q.ids[j];
    residual[id] = std::max(0.0, residual[id] - static_cast<double>(q.probs[j]));
  }
  const double u = UniformDouble(seed, RandomStream::kResample, position);
  int token = SampleFromProbs(absl::MakeConstSpan(residual), u);
  if (token < 0) token = SampleFromProbs(p, u);
  if (token < 0) return NoMassError(index);
  return token;
}

}  // namespace

bool RuleReadsProposalDistribution(AcceptanceRule rule) {
  return rule == AcceptanceRule::kRejection || rule == AcceptanceRule::kRatio;
}

absl::Status ValidateTargetDistributions(absl::Span<const absl::Span<const float>> target_probs,
                                         size_t k) {
  if (target_probs.size() != k + 1) {
    return absl::InvalidArgumentError(absl::StrCat("acceptance: ", k, " proposals need ", k + 1,
                                                   " target distributions, got ",
                                                   target_probs.size()));
  }
  const size_t vocab = target_probs[0].size();
  if (vocab == 0) {
    return absl::InvalidArgumentError("acceptance: target distributions are empty");
  }
  for (size_t i = 1; i < target_probs.size(); ++i) {
    if (target_probs[i].size() != vocab) {
      return absl::InvalidArgumentError(absl::StrCat("acceptance: target distribution ", i, " has ",
                                                     target_probs[i].size(),
                                                     " entries, distribution 0 has ", vocab));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateProposalDistribution(const Proposal& proposal, size_t vocab,
                                          absl::string_view where) {
  const SparseDistribution& q = proposal.q;
  if (q.ids.empty() || q.ids.size() != q.probs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "proposal distribution needs as many ids as probs and at least one, got ",
        q.ids.size(), " ids and ", q.probs.size(), " probs"));
  }
  double sum = 0.0;
  for (size_t j = 0; j < q.ids.size(); ++j) {
    if (q.ids[j] < 0 || static_cast<size_t>(q.ids[j]) >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "q id ", q.ids[j], " outside [0, ", vocab, ")"));
    }
    if (!(q.probs[j] >= 0.0f) || !std::isfinite(q.probs[j])) {
      return absl::InvalidArgumentError(absl::StrCat(where, "q prob of token ", q.ids[j],
                                                     " must be finite and >= 0, got ", q.probs[j]));
    }
    sum += q.probs[j];
  }
  if (std::fabs(sum - 1.0) > kProposalSumTolerance) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "q probs sum to ", sum, ", expected 1 within ", kProposalSumTolerance));
  }
  std::vector<int32_t> ids = q.ids;
  std::sort(ids.begin(), ids.end());
  const auto duplicate = std::adjacent_find(ids.begin(), ids.end());
  if (duplicate != ids.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "q lists token ", *duplicate, " more than once"));
  }
  if (!(ProbabilityOf(q, proposal.token) > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "the proposed token must have positive probability under its q"));
  }
  return absl::OkStatus();
}

bool PassesDeterministicTest(const AcceptanceParams& params, const Proposal& proposal,
                             absl::Span<const float> p, int i, int k) {
  const double p_token = p[proposal.token];
  switch (params.rule) {
    case AcceptanceRule::kGreedy:
      return proposal.token == Argmax(p);
    case AcceptanceRule::kThreshold:
      return p_token > AlphaOrDefault(params);
    case AcceptanceRule::kRatio:
      return static_cast<double>(ProbabilityOf(proposal.q, proposal.token)) >=
             AlphaOrDefault(params) * p_token;
    case AcceptanceRule::kPosition:
      return p_token >= PositionThreshold(i, k, params.theta_first, params.theta_last);
    case AcceptanceRule::kTypical:
      // p > min(epsilon, bound) iff p > epsilon or p > bound: the O(vocab) entropy
      // is needed only when the epsilon test fails.
      return p_token > static_cast<double>(params.epsilon) ||
             p_token > TypicalThreshold(p, params.epsilon, params.delta);
    case AcceptanceRule::kRejection:
    case AcceptanceRule::kCoupled:
      return false;
  }
  return false;
}

EmitMode CorrectionMode(AcceptanceRule rule) {
  switch (rule) {
    case AcceptanceRule::kGreedy:
    case AcceptanceRule::kTypical:
      return EmitMode::kArgmax;
    case AcceptanceRule::kCoupled:
      return EmitMode::kGumbel;
    default:
      return EmitMode::kSample;
  }
}

EmitMode BonusMode(AcceptanceRule rule) {
  switch (rule) {
    case AcceptanceRule::kGreedy:
      return EmitMode::kArgmax;
    case AcceptanceRule::kCoupled:
      return EmitMode::kGumbel;
    default:
      return EmitMode::kSample;
  }
}

int32_t EmitToken(absl::Span<const float> p, EmitMode how, const RandomKey& key, uint64_t offset) {
  switch (how) {
    case EmitMode::kArgmax: {
      const int token = Argmax(p);
      return token >= 0 && p[token] > 0.0f ? token : -1;
    }
    case EmitMode::kSample:
      return SampleFromProbs(
          p, UniformDouble(key.seed, RandomStream::kResample, key.sample_index + offset));
    case EmitMode::kGumbel:
      return GumbelSample(p, key.seed, key.position + offset);
  }
  return -1;
}

absl::StatusOr<AcceptanceResult> AcceptProposals(
    absl::Span<const Proposal> proposals, absl::Span<const absl::Span<const float>> target_probs,
    const AcceptanceParams& params, const RandomKey& key) {
  absl::Status status = ValidateRuleParameters(params);
  if (!status.ok()) return status;
  status = ValidateInputs(proposals, target_probs, params.rule);
  if (!status.ok()) return status;

  const size_t k = proposals.size();
  AcceptanceResult result;
  result.committed.reserve(k + 1);
  for (size_t i = 0; i < k; ++i) {
    const absl::Span<const float> p = target_probs[i];
    const int32_t token = proposals[i].token;
    const uint64_t position = key.sample_index + i;
    bool accept = false;
    int32_t coupled_token = -1;  // t_i of the coupled rule.
    switch (params.rule) {
      case AcceptanceRule::kRejection: {
        const double q_token = ProbabilityOf(proposals[i].q, token);
        const double u = UniformDouble(key.seed, RandomStream::kAccept, position);
        accept = u < std::min(1.0, static_cast<double>(p[token]) / q_token);
        break;
      }
      case AcceptanceRule::kCoupled:
        coupled_token = GumbelSample(p, key.seed, key.position + i);
        if (coupled_token < 0) return NoMassError(i);
        accept = token == coupled_token;
        break;
      default:
        accept = PassesDeterministicTest(params, proposals[i], p, static_cast<int>(i) + 1,
                                         static_cast<int>(k));
        break;
    }
    if (accept) {
      result.committed.push_back(token);
      ++result.num_accepted;
      continue;
    }
    if (params.rule == AcceptanceRule::kCoupled) {
      result.committed.push_back(coupled_token);
      return result;
    }
    absl::StatusOr<int32_t> correction =
        params.rule == AcceptanceRule::kRejection
            ? SampleResidual(p, proposals[i].q, i, key.seed, position)
            : EmitOrError(p, i, CorrectionMode(params.rule), key, i);
    if (!correction.ok()) return correction.status();
    result.committed.push_back(*correction);
    return result;
  }
  absl::StatusOr<int32_t> bonus = EmitOrError(target_probs[k], k, BonusMode(params.rule), key, k);
  if (!bonus.ok()) return bonus.status();
  result.committed.push_back(*bonus);
  return result;
}

}  // namespace spec
}  // namespace tandem
