// The acceptance of one verified chain as block-parallel code: the same semantics as
// the host reference (verify_accept.h: spec::ProcessLogits, spec::AcceptProposals,
// spec::CommittedLogProb), written once against a `Block` of cooperating threads so it
// runs as a CUDA kernel (kernels/cuda/accept_kernels.cu, one block per chain) and, for
// tests on any machine, on the host (host_block.h, which reproduces the device's
// reduction order exactly).
//
// Block contract (host_block.h / DeviceBlock). Every thread of the block calls every
// primitive together with the same arguments (uniform control flow); values returned are
// the same in every thread:
//   kThreads                       threads per block (256)
//   Reduce<T>(n, init, value, op)  op-fold of value(i), i < n: thread t folds i = t,
//                                  t + kThreads, ... in increasing order from init, then
//                                  partial[t] = op(partial[t], partial[t + s]) for
//                                  s = kThreads/2, ..., 1. A fixed order: bitwise the same
//                                  wherever it runs, given the same value(i).
//   ChunkScan(n, weight, visit)    thread t owns the contiguous chunk [t c, (t+1) c),
//                                  c = ceil(n / kThreads); running sums of weight(i) in index
//                                  order (chunk sums, then their prefix in chunk order);
//                                  visit(i, w, before, after, total) is called once for every
//                                  i; returns the smallest i for which it returned true, or -1.
//   ForEach(n, body)               body(i) for every i < n (thread i % kThreads), then a
//                                  barrier.
//   leader()                       true in exactly one thread (writes of uniform results).
//
// Differences from the host reference, all in the last bits of double sums: sums are
// tree/chunk ordered instead of sequential, so a top-p crossing or an inverse-CDF draw
// that falls within rounding of a boundary can pick a neighbouring token.
// accept_algorithm_test measures this against the reference (no difference expected on
// random inputs).
#ifndef TANDEM_KERNELS_ACCEPT_ACCEPT_ALGORITHM_H_
#define TANDEM_KERNELS_ACCEPT_ACCEPT_ALGORITHM_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/accept/packed_types.h"
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
  kRuleTypical = 5
};
constexpr uint32_t kStreamDraft = 0;
constexpr uint32_t kStreamAccept = 1;
constexpr uint32_t kStreamResample = 2;

namespace detail {

constexpr double kInf = static_cast<double>(INFINITY);

TANDEM_HOST_DEVICE inline bool IsFinite(double x) { return x - x == 0.0; }
TANDEM_HOST_DEVICE inline bool IsNan(double x) { return x != x; }
TANDEM_HOST_DEVICE inline double Exp(double x) {
#if defined(__CUDA_ARCH__)
  return ::exp(x);
#else
  return std::exp(x);
#endif
}
TANDEM_HOST_DEVICE inline double Log(double x) {
#if defined(__CUDA_ARCH__)
  return ::log(x);
#else
  return std::log(x);
#endif
}
// a * b, never fused with a following add (nvcc contracts a * b + c into an FMA by
// default, which would round differently from the host).
TANDEM_HOST_DEVICE inline double Mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
TANDEM_HOST_DEVICE inline uint64_t BitsOf(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
}
TANDEM_HOST_DEVICE inline double FromBits(uint64_t bits) {
  double x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

// (value, index) for argmax: NaN values are skipped (index -1), larger wins, ties go to
// the lower index: associative and commutative, so any reduction order agrees.
struct Best {
  double value;
  int index;
};
TANDEM_HOST_DEVICE inline Best BetterOf(Best a, Best b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  if (a.value != b.value) return a.value > b.value ? a : b;
  return a.index < b.index ? a : b;
}

// spec::Argmax over value(i), i < n.
template <class Block, class V>
TANDEM_HOST_DEVICE int ArgMax(Block& block, int n, V value) {
  return block.template Reduce<Best>(
                  n, Best{0.0, -1},
                  [&](int i) {
                    const double x = value(i);
                    return IsNan(x) ? Best{0.0, -1} : Best{x, i};
                  },
                  [](Best a, Best b) { return BetterOf(a, b); })
      .index;
}

template <class Block, class V>
TANDEM_HOST_DEVICE double Sum(Block& block, int n, V value) {
  return block.template Reduce<double>(n, 0.0, value,
                                       [](double a, double b) { return a + b; });
}

template <class Block, class V>
TANDEM_HOST_DEVICE double Max(Block& block, int n, V value) {
  return block.template Reduce<double>(n, -kInf, value,
                                       [](double a, double b) { return a > b ? a : b; });
}

// spec::SampleFromProbs over weight(i) (non-positive or non-finite weights count as 0)
// with uniform u in [0, 1): the first index whose running weight exceeds u * total, the
// last positive index when rounding leaves none; -1 when no weight is positive.
template <class Block, class W>
TANDEM_HOST_DEVICE int SampleInverseCdf(Block& block, int n, W weight, double u) {
  const auto positive = [&](int i) {
    const double w = weight(i);
    return w > 0.0 && IsFinite(w) ? w : 0.0;
  };
  const int last = block.template Reduce<int>(
      n, -1, [&](int i) { return positive(i) > 0.0 ? i : -1; },
      [](int a, int b) { return a > b ? a : b; });
  if (last < 0) return -1;
  const int found = block.ChunkScan(
      n, positive, [&](int, double w, double, double after, double total) {
        return w > 0.0 && Mul(u, total) < after;
      });
  return found >= 0 ? found : last;
}

// Keeps the top_k largest weights (ties to the lower index), zeroing the others.
// Weights are finite and >= 0. The k-th largest value is found bit by bit from its
// IEEE pattern (positive doubles order as their bits).
template <class Block>
TANDEM_HOST_DEVICE void KeepTopK(Block& block, int n, int top_k, double* w) {
  const double k = top_k;
  if (Sum(block, n, [&](int i) { return w[i] > 0.0 ? 1.0 : 0.0; }) <= k) return;
  uint64_t prefix = 0;
  for (int bit = 62; bit >= 0; --bit) {
    const uint64_t candidate = prefix | (uint64_t{1} << bit);
    const double count = Sum(block, n, [&](int i) {
      return w[i] > 0.0 && BitsOf(w[i]) >= candidate ? 1.0 : 0.0;
    });
    if (count >= k) prefix = candidate;
  }
  const double kth = FromBits(prefix);
  const double need = k - Sum(block, n, [&](int i) { return w[i] > kth ? 1.0 : 0.0; });
  block.ChunkScan(
      n, [&](int i) { return w[i] == kth ? 1.0 : 0.0; },
      [&](int i, double, double before, double, double) {
        if (w[i] < kth || (w[i] == kth && before >= need)) w[i] = 0.0;
        return false;
      });
}

// Keeps the smallest most-likely set whose weight reaches top_p of the total (descending
// weight, ties to the lower index, the crossing entry included), zeroing the others.
template <class Block>
TANDEM_HOST_DEVICE void KeepTopP(Block& block, int n, float top_p, double* w) {
  const double total = Sum(block, n, [&](int i) { return w[i]; });
  const double target = Mul(top_p, total);
  if (!(target > 0.0)) {  // Keeps the single most likely entry.
    const int best = ArgMax(block, n, [&](int i) { return w[i]; });
    block.ForEach(n, [&](int i) {
      if (i != best) w[i] = 0.0;
    });
    return;
  }
  if (total < target) return;  // Rounding: the whole support is needed.
  uint64_t prefix = 0;         // Bits of the smallest kept value.
  for (int bit = 62; bit >= 0; --bit) {
    const uint64_t candidate = prefix | (uint64_t{1} << bit);
    const double mass = Sum(block, n, [&](int i) {
      return w[i] > 0.0 && BitsOf(w[i]) >= candidate ? w[i] : 0.0;
    });
    if (mass >= target) prefix = candidate;
  }
  const double last = FromBits(prefix);
  const double above = Sum(block, n, [&](int i) { return w[i] > last ? w[i] : 0.0; });
  block.ChunkScan(
      n, [&](int i) { return w[i] == last ? last : 0.0; },
      [&](int i, double, double before, double, double) {
        if (w[i] < last || (w[i] == last && !(above + before < target))) w[i] = 0.0;
        return false;
      });
}

// spec::ProcessLogits of one row: logit(i) -> probs[i]; `w` is a double workspace.
template <class Block, class Row>
TANDEM_HOST_DEVICE void ProcessRow(Block& block, int n, Row logit,
                                   const PackedSampling& sampling, float* probs, double* w) {
  const auto one_hot = [&] {
    const int best = ArgMax(block, n, [&](int i) { return static_cast<double>(logit(i)); });
    block.ForEach(n, [&](int i) { probs[i] = i == best ? 1.0f : 0.0f; });
  };
  if (!(sampling.temperature > 0.0f)) return one_hot();
  const double max_finite = Max(block, n, [&](int i) {
    const double x = logit(i);
    return IsFinite(x) ? x : -kInf;
  });
  const bool any_positive_infinity =
      Sum(block, n, [&](int i) { return logit(i) == INFINITY ? 1.0 : 0.0; }) > 0.0;
  if (max_finite == -kInf && !any_positive_infinity) return one_hot();
  const double temperature = sampling.temperature;
  block.ForEach(n, [&](int i) {
    const double x = logit(i);
    if (any_positive_infinity) {
      w[i] = x == kInf ? 1.0 : 0.0;
    } else {
      w[i] = IsFinite(x) ? Exp((x - max_finite) / temperature) : 0.0;
    }
  });
  if (!(Sum(block, n, [&](int i) { return w[i] > 0.0 ? 1.0 : 0.0; }) > 0.0)) return one_hot();
  if (sampling.top_k > 0 && sampling.top_k < n) KeepTopK(block, n, sampling.top_k, w);
  if (sampling.top_p < 1.0f) KeepTopP(block, n, sampling.top_p, w);
  const double total = Sum(block, n, [&](int i) { return w[i]; });
  block.ForEach(n, [&](int i) { probs[i] = static_cast<float>(w[i] / total); });
}

// spec::CommittedLogProb of `token` drawn from a row.
template <class Block, class Row>
TANDEM_HOST_DEVICE double CommittedLogProb(Block& block, int n, Row logit, const float* probs,
                                           int token, bool greedy) {
  if (!greedy) {
    const float p = probs[token];
    return p > 0.0f ? Log(static_cast<double>(p)) : -kInf;
  }
  const double max = Max(block, n, [&](int i) {
    const double x = logit(i);
    return IsFinite(x) ? x : -kInf;
  });
  if (!IsFinite(max)) return -kInf;
  const double sum = Sum(block, n, [&](int i) {
    const double x = logit(i);
    return IsFinite(x) ? Exp(x - max) : 0.0;
  });
  const double value = logit(token);
  if (!IsFinite(value)) return -kInf;
  return value - max - Log(sum);
}

}  // namespace detail

// Runs the acceptance of chain `c` of `view` on `block` and writes its outputs
// (out_tokens / out_logprobs slots, out_status[c]).
template <class Block>
TANDEM_HOST_DEVICE void AcceptChain(Block& block, const BatchView& view, int c) {
  using namespace detail;  // NOLINT: the helpers above, local to this header.
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
  // A token drawn from probs: its argmax, or the kResample draw at `position`; -1 when
  // probs has no mass.
  const auto emit = [&](bool use_argmax, uint64_t position) {
    if (use_argmax) {
      const int best = ArgMax(block, n, [&](int i) { return static_cast<double>(probs[i]); });
      return best >= 0 && probs[best] > 0.0f ? best : -1;
    }
    const double u = spec::philox::Uniform(chain.seed, kStreamResample, position, 0);
    return SampleInverseCdf(block, n, [&](int i) { return static_cast<double>(probs[i]); }, u);
  };

  for (int i = 0; i < k; ++i) {
    ProcessRow(block, n, row(i), chain.sampling, probs, w);
    const int token = view.tokens[chain.proposal_begin + i];
    const double p_token = probs[token];
    const uint64_t position = chain.sample_index + i;
    const int q_first = view.q_begin[chain.proposal_begin + i];
    const int q_end = view.q_begin[chain.proposal_begin + i + 1];
    double q_token = 0.0;
    for (int j = q_first; j < q_end; ++j) {
      if (view.q_ids[j] == token) {
        q_token = view.q_probs[j];
        break;
      }
    }
    bool accept = false;
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
        accept = p_token > static_cast<double>(chain.alpha);
        break;
      case kRuleRatio:
        accept = q_token >= Mul(chain.alpha, p_token);
        break;
      case kRulePosition: {
        const double first = chain.theta_first, last = chain.theta_last;
        accept = p_token >= first - Mul(static_cast<double>(i + 1) / k, first - last);
        break;
      }
      case kRuleTypical: {
        const double epsilon = chain.epsilon;
        accept = p_token > epsilon;
        if (!accept) {
          const double entropy = Sum(block, n, [&](int v) {
            const double p = probs[v];
            return p > 0.0 && IsFinite(p) ? -Mul(p, Log(p)) : 0.0;
          });
          const double bound = Mul(chain.delta, Exp(-entropy));
          accept = p_token > (epsilon < bound ? epsilon : bound);
        }
        break;
      }
      default:
        break;
    }
    if (accept) {
      commit(i, token);
      continue;
    }
    int correction;
    if (chain.rule == kRuleRejection) {
      // normalize(max(0, p - q)), or p when that has no mass; q ids are distinct.
      block.ForEach(n, [&](int v) { w[v] = probs[v]; });
      block.ForEach(q_end - q_first, [&](int j) {
        const int id = view.q_ids[q_first + j];
        const double residual = w[id] - static_cast<double>(view.q_probs[q_first + j]);
        w[id] = residual > 0.0 ? residual : 0.0;
      });
      const double u = spec::philox::Uniform(chain.seed, kStreamResample, position, 0);
      correction = SampleInverseCdf(block, n, [&](int v) { return w[v]; }, u);
      if (correction < 0) {
        correction =
            SampleInverseCdf(block, n, [&](int v) { return static_cast<double>(probs[v]); }, u);
      }
    } else {
      correction = emit(chain.rule == kRuleGreedy || chain.rule == kRuleTypical, position);
    }
    if (correction < 0) return finish(i);
    commit(i, correction);
    return finish(-1);
  }
  ProcessRow(block, n, row(k), chain.sampling, probs, w);
  const int bonus = emit(chain.rule == kRuleGreedy, chain.sample_index + k);
  if (bonus < 0) return finish(k);
  commit(k, bonus);
  finish(-1);
}

// Samples the proposal of draft row `index` of `view` on `block` (draft_sample.h):
// greedy: the argmax with a point-mass q; otherwise the processed row, its q_size most
// likely tokens (descending, ties to the lower id; repeated block argmax) renormalised
// and a token drawn from them with the kDraftSample uniform. The renormalisation and
// the draw over q run on the leader in spec's sequential order. Writes out_tokens,
// out_q_counts and the q slots of the row.
template <class Block>
TANDEM_HOST_DEVICE void SampleDraftRow(Block& block, const DraftView& view, int index) {
  using namespace detail;  // NOLINT: the helpers above, local to this header.
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
  if (!(draft.sampling.temperature > 0.0f)) {
    const int best = ArgMax(block, n, [&](int v) { return static_cast<double>(logit(v)); });
    if (block.leader() && best >= 0) {
      ids[0] = best;
      q[0] = 1.0f;
    }
    return finish(best, 1);
  }
  ProcessRow(block, n, logit, draft.sampling, probs, w);
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
