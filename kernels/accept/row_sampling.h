// Block-parallel building blocks of the sampling algorithms (accept_algorithm.h):
// fixed-order reductions, argmax, inverse-CDF sampling, top-k / top-p selection and
// spec::ProcessLogits / spec::CommittedLogProb of one row, written once against a
// `Block` of cooperating threads so they run in CUDA kernels and, for tests on any
// machine, on the host (host_block.h, which reproduces the device's reduction order).
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
#ifndef TANDEM_KERNELS_ACCEPT_ROW_SAMPLING_H_
#define TANDEM_KERNELS_ACCEPT_ROW_SAMPLING_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/accept/packed_types.h"
#include "spec/host_device.h"

namespace tandem {
namespace accept {
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
  return block
      .template Reduce<Best>(
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
  return block.template Reduce<double>(n, 0.0, value, [](double a, double b) { return a + b; });
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
  const int found =
      block.ChunkScan(n, positive, [&](int, double w, double, double after, double total) {
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
    const double count =
        Sum(block, n, [&](int i) { return w[i] > 0.0 && BitsOf(w[i]) >= candidate ? 1.0 : 0.0; });
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
    const double mass =
        Sum(block, n, [&](int i) { return w[i] > 0.0 && BitsOf(w[i]) >= candidate ? w[i] : 0.0; });
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
TANDEM_HOST_DEVICE void ProcessRow(Block& block, int n, Row logit, const PackedSampling& sampling,
                                   float* probs, double* w) {
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

}  // namespace accept
}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_ROW_SAMPLING_H_
