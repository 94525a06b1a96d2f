// A thread block emulated on one host thread, for running accept_algorithm.h on any
// machine: every primitive visits the elements in exactly the order the device block's
// threads and reduction tree combine them, so given the same element values the
// results are bitwise those of the GPU. Used by tests and as the reference the CUDA
// kernel is compared with. Not thread-safe; cheap to construct.
#ifndef TANDEM_KERNELS_ACCEPT_HOST_BLOCK_H_
#define TANDEM_KERNELS_ACCEPT_HOST_BLOCK_H_

#include <algorithm>
#include <climits>
#include <vector>

namespace tandem {
namespace accept {

class HostBlock {
 public:
  static constexpr int kThreads = 256;

  bool leader() const { return true; }

  template <class T, class V, class Op>
  T Reduce(int n, T init, V value, Op op) {
    std::vector<T> partial(kThreads, init);
    for (int t = 0; t < kThreads; ++t) {
      T acc = init;
      for (int i = t; i < n; i += kThreads) acc = op(acc, value(i));
      partial[t] = acc;
    }
    for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
      for (int t = 0; t < stride; ++t) partial[t] = op(partial[t], partial[t + stride]);
    }
    return partial[0];
  }

  template <class W, class Visit>
  int ChunkScan(int n, W weight, Visit visit) {
    const int chunk = (n + kThreads - 1) / kThreads;
    std::vector<double> prefix(kThreads + 1, 0.0);
    for (int t = 0; t < kThreads; ++t) {
      double local = 0.0;
      for (int i = t * chunk; i < std::min(n, (t + 1) * chunk); ++i) local += weight(i);
      prefix[t] = local;
    }
    double running = 0.0;
    for (int t = 0; t < kThreads; ++t) {
      const double local = prefix[t];
      prefix[t] = running;
      running += local;
    }
    prefix[kThreads] = running;
    int found = INT_MAX;
    for (int t = 0; t < kThreads; ++t) {
      double before = prefix[t];
      for (int i = t * chunk; i < std::min(n, (t + 1) * chunk); ++i) {
        const double w = weight(i);
        const double after = before + w;
        if (visit(i, w, before, after, running) && i < found) found = i;
        before = after;
      }
    }
    return found == INT_MAX ? -1 : found;
  }

  template <class Body>
  void ForEach(int n, Body body) {
    for (int i = 0; i < n; ++i) body(i);
  }
};

}  // namespace accept
}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_HOST_BLOCK_H_
