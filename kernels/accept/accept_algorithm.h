// The acceptance of one verified chain and the sampling of one draft row as
// block-parallel code: the same semantics as the host references (verify_accept.h:
// spec::ProcessLogits, spec::AcceptProposals, spec::CommittedLogProb; draft_sample.h),
// written once against a `Block` of cooperating threads so they run as CUDA kernels
// (kernels/cuda/accept_kernels.cu, one block per chain or row) and, for tests on any
// machine, on the host (host_block.h, which reproduces the device's reduction order
// exactly).
//
// The Block contract and the row-level building blocks are in row_sampling.h.
//
// Differences from the host reference, all in the last bits of double sums: sums are
// tree/chunk ordered instead of sequential, so a top-p crossing or an inverse-CDF draw
// that falls within rounding of a boundary can pick a neighbouring token.
// accept_algorithm_test measures this against the reference (no difference expected on
// random inputs).
#ifndef TANDEM_KERNELS_ACCEPT_ACCEPT_ALGORITHM_H_
#define TANDEM_KERNELS_ACCEPT_ACCEPT_ALGORITHM_H_

#include <cstdint>

#include "kernels/accept/packed_types.h"
#include "kernels/accept/row_sampling.h"
#include "spec/host_device.h"
#include "spec/philox.h"

namespace tandem {
namespace accept {

// spec::AcceptanceRule values (checked in packed_batch.cc) and spec::RandomStream.
enum RuleCode : int32_t {
  kRuleGreedy = 0,
  kRuleRejection = 1,
  kRuleThreshold = 2,
  kRuleRatio = 3,
  kRulePosition = 4,
  kRuleTypical = 5,
  kRuleCoupled = 6
};
constexpr uint32_t kStreamDraft = 0;
constexpr uint32_t kStreamAccept = 1;
constexpr uint32_t kStreamResample = 2;
constexpr uint32_t kStreamGumbel = 4;  // Used through spec::philox::Gumbel.

namespace detail {

// spec::GumbelSample of probs[0..n) at absolute position `position`: the block argmax of
// spec::philox::GumbelScore (NaN outside the support, skipped); -1 without support.
template <class Block>
TANDEM_HOST_DEVICE int GumbelArgMax(Block& block, int n, const float* probs, uint64_t seed,
                                    uint64_t position) {
  return ArgMax(block, n, [&](int v) {
    return spec::philox::GumbelScore(probs[v], seed, position, static_cast<uint32_t>(v));
  });
}

// q(token) of proposal `j` (global index), 0 when q does not hold it.
TANDEM_HOST_DEVICE inline double QProbOf(const BatchView& view, int j, int token) {
  for (int e = view.q_begin[j]; e < view.q_begin[j + 1]; ++e) {
    if (view.q_ids[e] == token) return view.q_probs[e];
  }
  return 0.0;
}

// The test of a lossy rule (threshold, ratio, position, typical; spec::PassesDeterministicTest)
// for a proposal of p(token) = p_token, q(token) = q_token against the processed row
// probs; i in [1, k] and k are the position rule's proposal number and K. False for
// the other rules.
template <class Block>
TANDEM_HOST_DEVICE bool PassesLossyTest(Block& block, const PackedChain& chain, int n,
                                        const float* probs, double p_token, double q_token, int i,
                                        int k) {
  switch (chain.rule) {
    case kRuleThreshold:
      return p_token > static_cast<double>(chain.alpha);
    case kRuleRatio:
      return q_token >= Mul(chain.alpha, p_token);
    case kRulePosition: {
      const double first = chain.theta_first, last = chain.theta_last;
      return p_token >= first - Mul(static_cast<double>(i) / k, first - last);
    }
    case kRuleTypical: {
      const double epsilon = chain.epsilon;
      if (p_token > epsilon) return true;
      const double entropy = Sum(block, n, [&](int v) {
        const double p = probs[v];
        return p > 0.0 && IsFinite(p) ? -Mul(p, Log(p)) : 0.0;
      });
      const double bound = Mul(chain.delta, Exp(-entropy));
      return p_token > (epsilon < bound ? epsilon : bound);
    }
    default:
      return false;
  }
}

// One refusal of the rejection rule: next = max(0, P - q_j) for the current residual P
// (probs when `from_probs`, else current / mass), q_j the q of proposal j (global
// index; distinct ids). Returns the positive finite mass of `next` (P is kept, i.e.
// `next` is to be ignored, when it is not > 0).
template <class Block>
TANDEM_HOST_DEVICE double SubtractQ(Block& block, const BatchView& view, int j, int n,
                                    const float* probs, bool from_probs, const double* current,
                                    double mass, double* next) {
  block.ForEach(n, [&](int v) {
    const double x = from_probs ? static_cast<double>(probs[v]) : current[v] / mass;
    next[v] = x > 0.0 ? x : 0.0;
  });
  const int q_first = view.q_begin[j];
  block.ForEach(view.q_begin[j + 1] - q_first, [&](int e) {
    const int id = view.q_ids[q_first + e];
    const double residual = next[id] - static_cast<double>(view.q_probs[q_first + e]);
    next[id] = residual > 0.0 ? residual : 0.0;
  });
  return Sum(block, n, [&](int v) { return next[v] > 0.0 && IsFinite(next[v]) ? next[v] : 0.0; });
}

// spec::EmitToken of the processed row probs for the argmax or sample modes: argmax
// probs (only if positive), or the inverse-CDF sample with the kResample draw at
// generated index `index`; -1 when probs has no mass.
template <class Block>
TANDEM_HOST_DEVICE int EmitFromRow(Block& block, const PackedChain& chain, int n,
                                   const float* probs, bool use_argmax, uint64_t index) {
  if (use_argmax) {
    const int best = ArgMax(block, n, [&](int i) { return static_cast<double>(probs[i]); });
    return best >= 0 && probs[best] > 0.0f ? best : -1;
  }
  const double u = spec::philox::Uniform(chain.seed, kStreamResample, index, 0);
  return SampleInverseCdf(
      block, n, [&](int i) { return static_cast<double>(probs[i]); }, u);
}

}  // namespace detail

// Runs the acceptance of chain `c` of `view` on `block` and writes its outputs
// (out_tokens / out_logprobs slots, out_status[c]).
template <class Block>
TANDEM_HOST_DEVICE void AcceptChain(Block& block, const BatchView& view, int c) {
  using namespace detail;  // NOLINT: the row building blocks (row_sampling.h).
  const PackedChain chain = view.chains[c];
  const int n = view.logits.vocab, k = chain.num_proposals;
  float* probs = view.probs + size_t(c) * n;
  double* w = view.weights + size_t(c) * n;
  int32_t* out_tokens = view.out_tokens + chain.output_begin;
  float* out_logprobs = view.out_logprobs + chain.output_begin;
  const bool greedy_sampling = !(chain.sampling.temperature > 0.0f);
  int committed = 0;

  // The accessor of logit row `i` of the chain.
  const auto row = [&](int i) {
    const size_t r = size_t(chain.first_row) + i;
    return [&view, r](int v) { return view.logits.At(r, v); };
  };
  const auto commit = [&](int i, int token) {
    double logprob = 0.0;
    if (chain.want_logprobs) {
      logprob = CommittedLogProb(block, n, row(i), probs, token, greedy_sampling);
    }
    if (block.leader()) {
      out_tokens[committed] = token;
      out_logprobs[committed] = static_cast<float>(logprob);
    }
    ++committed;
  };
  const auto finish = [&](int error_index) {
    if (block.leader()) {
      PackedStatus status;
      status.error_index = error_index;
      status.num_committed = error_index >= 0 ? 0 : committed;
      status.num_accepted = error_index >= 0 ? 0 : committed - 1;
      view.out_status[c] = status;
    }
  };
  const auto emit = [&](bool use_argmax, uint64_t index) {
    return EmitFromRow(block, chain, n, probs, use_argmax, index);
  };

  for (int i = 0; i < k; ++i) {
    ProcessRow(block, n, row(i), chain.sampling, probs, w);
    const int token = view.tokens[chain.proposal_begin + i];
    const double p_token = probs[token];
    const uint64_t position = chain.sample_index + i;
    const double q_token = QProbOf(view, chain.proposal_begin + i, token);
    bool accept = false;
    int coupled_token = -1;  // t_i of the coupled rule.
    switch (chain.rule) {
      case kRuleGreedy:
        accept = token == ArgMax(block, n, [&](int v) { return static_cast<double>(probs[v]); });
        break;
      case kRuleRejection: {
        const double u = spec::philox::Uniform(chain.seed, kStreamAccept, position, 0);
        const double ratio = p_token / q_token;
        accept = u < (ratio < 1.0 ? ratio : 1.0);
        break;
      }
      case kRuleThreshold:
      case kRuleRatio:
      case kRulePosition:
      case kRuleTypical:
        accept = PassesLossyTest(block, chain, n, probs, p_token, q_token, i + 1, k);
        break;
      case kRuleCoupled:
        coupled_token = GumbelArgMax(block, n, probs, chain.seed, chain.position + i);
        if (coupled_token < 0) return finish(i);
        accept = token == coupled_token;
        break;
      default:
        break;
    }
    if (accept) {
      commit(i, token);
      continue;
    }
    int correction;
    if (chain.rule == kRuleCoupled) {
      correction = coupled_token;
    } else if (chain.rule == kRuleRejection) {
      // normalize(max(0, p - q)), or p when that has no mass.
      const double mass =
          SubtractQ(block, view, chain.proposal_begin + i, n, probs, true, nullptr, 1.0, w);
      const double u = spec::philox::Uniform(chain.seed, kStreamResample, position, 0);
      correction = mass > 0.0
                       ? SampleInverseCdf(
                             block, n, [&](int v) { return w[v]; }, u)
                       : SampleInverseCdf(
                             block, n, [&](int v) { return static_cast<double>(probs[v]); }, u);
    } else {
      correction = emit(chain.rule == kRuleGreedy || chain.rule == kRuleTypical, position);
    }
    if (correction < 0) return finish(i);
    commit(i, correction);
    return finish(-1);
  }
  ProcessRow(block, n, row(k), chain.sampling, probs, w);
  const int bonus = chain.rule == kRuleCoupled
                        ? GumbelArgMax(block, n, probs, chain.seed, chain.position + k)
                        : emit(chain.rule == kRuleGreedy, chain.sample_index + k);
  if (bonus < 0) return finish(k);
  commit(k, bonus);
  finish(-1);
}

// Samples the proposal of draft row `index` of `view` on `block` (draft_sample.h):
// greedy: the argmax with a point-mass q; coupled: the Gumbel argmax of the processed
// row at draft.position with a point-mass q; otherwise the processed row, its q_size most
// likely tokens (descending, ties to the lower id; repeated block argmax) renormalised
// and a token drawn from them with the kDraftSample uniform. The renormalisation and
// the draw over q run on the leader in spec's sequential order. Writes out_tokens,
// out_q_counts and the q slots of the row.
template <class Block>
TANDEM_HOST_DEVICE void SampleDraftRow(Block& block, const DraftView& view, int index) {
  using namespace detail;  // NOLINT: the row building blocks (row_sampling.h).
  const PackedDraftRow draft = view.drafts[index];
  const int n = view.logits.vocab;
  const size_t r = draft.row;
  const auto logit = [&view, r](int v) { return view.logits.At(r, v); };
  float* probs = view.probs + size_t(index) * n;
  double* w = view.weights + size_t(index) * n;
  int32_t* ids = view.out_q_ids + draft.output_begin;
  float* q = view.out_q_probs + draft.output_begin;
  const auto finish = [&](int token, int count) {
    if (block.leader()) {
      view.out_tokens[index] = token;
      view.out_q_counts[index] = token >= 0 ? count : 0;
    }
  };
  const auto point_mass = [&](int token) {
    if (block.leader() && token >= 0) {
      ids[0] = token;
      q[0] = 1.0f;
    }
    return finish(token, 1);
  };
  if (!(draft.sampling.temperature > 0.0f)) {
    return point_mass(ArgMax(block, n, [&](int v) { return static_cast<double>(logit(v)); }));
  }
  ProcessRow(block, n, logit, draft.sampling, probs, w);
  if (draft.coupled) return point_mass(GumbelArgMax(block, n, probs, draft.seed, draft.position));
  block.ForEach(n, [&](int v) { w[v] = probs[v]; });
  int count = 0;
  for (; count < draft.q_size; ++count) {  // Taken entries become -1.
    const int best = ArgMax(block, n, [&](int v) { return w[v]; });
    if (best < 0 || !(w[best] > 0.0)) break;
    if (block.leader()) ids[count] = best;
    block.ForEach(1, [&](int) { w[best] = -1.0; });
  }
  if (!block.leader()) return;
  double total = 0.0;
  for (int j = 0; j < count; ++j) total += probs[ids[j]];
  for (int j = 0; j < count; ++j) q[j] = static_cast<float>(probs[ids[j]] / total);
  // spec::SampleFromProbs over q in its order.
  int last = -1;
  double mass = 0.0;
  for (int j = 0; j < count; ++j) {
    if (q[j] > 0.0f && IsFinite(q[j])) {
      mass += q[j];
      last = j;
    }
  }
  int chosen = last;
  const double target =
      Mul(spec::philox::Uniform(draft.seed, kStreamDraft, draft.position, 0), mass);
  double cumulative = 0.0;
  for (int j = 0; j < last; ++j) {
    if (!(q[j] > 0.0f && IsFinite(q[j]))) continue;
    cumulative += q[j];
    if (target < cumulative) {
      chosen = j;
      break;
    }
  }
  finish(chosen >= 0 ? ids[chosen] : -1, count);
}

}  // namespace accept
}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_ACCEPT_ALGORITHM_H_
