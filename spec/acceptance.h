// Acceptance rules of speculative decoding: given K proposed tokens with the
// distributions they were drawn from and the target's K+1 processed distributions,
// decide which proposals to keep and which token to add. Pure functions, no I/O.
//
// Rules (p = target, q = proposal, both after temperature / top-k / top-p):
//   greedy     accept d_i iff d_i == argmax p_i; on reject emit argmax p_i.
//              Token-identical to target-only greedy decoding.
//   rejection  accept iff u < min(1, p_i(d_i) / q_i(d_i)); on reject sample from
//              normalize(max(0, p_i - q_i)) (from p_i if that is all zero).
//              Lossless: committed tokens are distributed as target-only sampling.
//   threshold  accept iff p_i(d_i) > alpha; on reject sample from p_i.       (lossy)
//   ratio      accept iff q_i(d_i) >= alpha * p_i(d_i); on reject sample p_i. (lossy)
//   position   accept iff p_i(d_i) >= theta_i with
//              theta_i = theta_first - (i / K) (theta_first - theta_last), i = 1..K;
//              on reject sample from p_i.                                    (lossy)
//   typical    accept iff p_i(d_i) > min(epsilon, delta * exp(-H(p_i))) (H in nats);
//              on reject emit argmax p_i.                                    (lossy)
//   coupled    Gumbel-max coupling (lossless and seed-deterministic). Every position
//              is sampled as t_i = GumbelSample(p_i, seed, a_i) (spec/sampling.h):
//                t_i = argmax over v with p_i(v) > 0 of ln p_i(v) + g(v),
//                g(v) = GumbelNoise(seed, a_i, v) = -ln(-ln u(v)),
//                u(v) = UniformDouble(seed, kGumbel, a_i, v)         (spec/rng.h),
//              ties to the lower id (evaluated as argmax p_i(v) / -ln u(v), the same
//              order with one logarithm), where a_i = key.position + (i - 1) is the absolute
//              sequence position proposal i would occupy. Accept iff d_i == t_i; on
//              reject emit t_i. The draft proposes d_i = GumbelSample(q_i, seed, a_i)
//              with its own processed distribution q_i and the same noise (q is not
//              read here; the draft sends PointMass(d_i)). Each t_i is a function of
//              (seed, a_i, p_i) alone, and p_i of the committed prefix, so the output is
//              token-identical to target-only sampling with this rule (K = 0 steps) for
//              every K, proposer, batch and load; t_i ~ p_i exactly (Gumbel-max), so it
//              is lossless. Acceptance probability P(argmax(ln p + g) = argmax(ln q + g))
//              is at most 1 - TV(p, q), the rejection rule's. At temperature 0 p is
//              one-hot and coupled equals greedy.
// When all K proposals pass, a bonus token follows: argmax p_{K+1} for greedy,
// GumbelSample(p_{K+1}, seed, key.position + K) for coupled, a sample from p_{K+1} for
// every other rule. So 1..K+1 tokens are committed per step.
//
// Random draws (spec/rng.h), keyed by the request seed and the generated-token index
// n_i = sample_index + (i - 1) of proposal i, so results never depend on batching:
//   the acceptance test u of proposal i      UniformDouble(seed, kAccept, n_i)
//   the correction sample at proposal i      UniformDouble(seed, kResample, n_i)
//   the bonus sample                         UniformDouble(seed, kResample, sample_index + K)
// With K = 0 a step is plain decoding: one sample from p_1 with the kResample draw at
// sample_index (coupled: GumbelSample at key.position), exactly what target-only
// sampling at that index does.
//
// Typical use. Draft side, for generated index n:
//   ProcessLogits(draft_logits, config, &probs); q = TopKSparse(probs, 32);
//   d = SampleFromSparse(q, UniformDouble(seed, RandomStream::kDraftSample, n));
// Target side: ProcessLogits on each of the K+1 verify positions, then
//   AcceptProposals(proposals, p_spans, params, {seed, n_first}).
#ifndef TANDEM_SPEC_ACCEPTANCE_H_
#define TANDEM_SPEC_ACCEPTANCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "spec/acceptance_params.h"
#include "spec/sampling.h"

namespace tandem {
namespace spec {

// One proposed token and the distribution q it was sampled from. q is read by the
// rejection and ratio rules only (it may be empty for the others); there it must hold
// `token` with positive probability, distinct ids in [0, vocab), finite non-negative
// probabilities summing to 1 within 1e-3. Deterministic proposers use PointMass.
struct Proposal {
  int32_t token = 0;
  SparseDistribution q;
};

// Random key of one step: the request's seed; the index, among the request's
// generated tokens, of the first proposal (the position of the token this step's
// first commit will occupy), which keys the kAccept / kResample draws; and the absolute
// sequence position of that token (the cache position it will occupy), which keys the
// coupled rule's Gumbel noise so that the draft, which knows only cache positions,
// draws the same noise.
struct RandomKey {
  uint64_t seed = 0;
  uint64_t sample_index = 0;
  uint64_t position = 0;
};

struct AcceptanceResult {
  // The accepted proposals followed by one correction or bonus token: 1..K+1 tokens.
  std::vector<int32_t> committed;
  int num_accepted = 0;  // Proposals accepted, [0, K]; committed.size() - 1.
};

// Runs `params.rule` over K = proposals.size() proposals. target_probs holds the K+1
// processed target distributions p_1..p_{K+1} (p_i verifies proposal i, p_{K+1} gives
// the bonus), each a dense vocabulary-sized span; the spans are only read during the
// call. Probabilities are used as given (negative or non-finite entries count as 0
// when sampling). INVALID_ARGUMENT, saying which input is wrong, when: the parameters
// are out of range; target_probs.size() != K + 1; the spans are empty or of different
// sizes; a proposed token is outside [0, vocab); a required q is malformed; or a
// distribution to sample from has no positive entry (all-NaN logits upstream).
absl::StatusOr<AcceptanceResult> AcceptProposals(
    absl::Span<const Proposal> proposals, absl::Span<const absl::Span<const float>> target_probs,
    const AcceptanceParams& params, const RandomKey& key);

// ---- Building blocks of AcceptProposals, shared with the tree rules (spec/tree_acceptance.h).

// Whether `rule` reads the proposals' q (rejection and ratio).
bool RuleReadsProposalDistribution(AcceptanceRule rule);

// OK when target_probs holds k + 1 non-empty spans of one size; INVALID_ARGUMENT saying
// which is wrong otherwise.
absl::Status ValidateTargetDistributions(absl::Span<const absl::Span<const float>> target_probs,
                                         size_t k);

// OK when proposal.q is a valid q over [0, vocab) (see Proposal: ids and probs of one
// size, at least one, distinct ids in range, finite non-negative probabilities summing to
// 1 within 1e-3, proposal.token with positive probability); INVALID_ARGUMENT whose
// message starts with `where` otherwise.
absl::Status ValidateProposalDistribution(const Proposal& proposal, size_t vocab,
                                          absl::string_view where);

// The test of a deterministic rule (greedy, threshold, ratio, position, typical: the
// table above) for `proposal` against its target p (dense; q read by ratio only), where
// i in [1, k] and k are the position rule's proposal number and K. False for the
// randomised rules (rejection, coupled), which AcceptProposals decides itself.
bool PassesDeterministicTest(const AcceptanceParams& params, const Proposal& proposal,
                             absl::Span<const float> p, int i, int k);

// How a rule emits the token that follows its accepted proposals from the target p.
enum class EmitMode {
  kArgmax,  // argmax p (only if positive).
  kSample,  // The inverse-CDF sample with the kResample draw.
  kGumbel,  // GumbelSample.
};
// On a rejection: greedy, typical argmax; coupled Gumbel; the others a sample (rejection
// samples its residual, not p: AcceptProposals). After a full acceptance (the bonus):
// greedy argmax, coupled Gumbel, every other rule a sample.
EmitMode CorrectionMode(AcceptanceRule rule);
EmitMode BonusMode(AcceptanceRule rule);

// The token emitted from p, `offset` tokens after the step's first commit: argmax p;
// SampleFromProbs(p, UniformDouble(seed, kResample, sample_index + offset)); or
// GumbelSample(p, seed, position + offset). -1 when p has no positive entry.
int32_t EmitToken(absl::Span<const float> p, EmitMode how, const RandomKey& key, uint64_t offset);

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_ACCEPTANCE_H_
