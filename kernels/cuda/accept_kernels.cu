// The acceptance kernels (contract in accept_kernels.h): accept_algorithm.h and
// tree_accept_algorithm.h over a
// device block whose primitives combine values in the order accept::HostBlock emulates.
#include <cstdint>

#include "kernels/accept/accept_algorithm.h"
#include "kernels/accept/host_block.h"
#include "kernels/accept/tree_accept_algorithm.h"
#include "kernels/cuda/accept_kernels.h"

namespace tandem::cuda {
namespace {

static_assert(kAcceptThreads == accept::HostBlock::kThreads,
              "the host emulation must use the device block size");

// One CUDA block as an accept_algorithm.h Block. `scratch` is shared memory of at least
// kAcceptThreads + 1 slots of 16 bytes. Methods are host+device only so the algorithm
// template compiles for both sides; only the device side is ever run.
class DeviceBlock {
 public:
  static constexpr int kThreads = kAcceptThreads;

  __device__ explicit DeviceBlock(double2* scratch) : scratch_(scratch) {}

  TANDEM_HOST_DEVICE bool leader() const {
#if defined(__CUDA_ARCH__)
    return threadIdx.x == 0;
#else
    return false;
#endif
  }

  template <class T, class V, class Op>
  TANDEM_HOST_DEVICE T Reduce(int n, T init, V value, Op op) {
#if defined(__CUDA_ARCH__)
    static_assert(sizeof(T) <= sizeof(double2), "reduction slots are 16 bytes");
    const int t = threadIdx.x;
    T acc = init;
    for (int i = t; i < n; i += kThreads) acc = op(acc, value(i));
    T* slots = reinterpret_cast<T*>(scratch_);
    slots[t] = acc;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
      if (t < stride) slots[t] = op(slots[t], slots[t + stride]);
      __syncthreads();
    }
    const T result = slots[0];
    __syncthreads();
    return result;
#else
    return init;
#endif
  }

  template <class W, class Visit>
  TANDEM_HOST_DEVICE int ChunkScan(int n, W weight, Visit visit) {
#if defined(__CUDA_ARCH__)
    const int t = threadIdx.x;
    const int chunk = (n + kThreads - 1) / kThreads;
    const int begin = t * chunk;
    const int end = min(n, begin + chunk);
    double* prefix = reinterpret_cast<double*>(scratch_);
    double local = 0.0;
    for (int i = begin; i < end; ++i) local += weight(i);
    prefix[t] = local;
    __syncthreads();
    if (t == 0) {
      double running = 0.0;
      for (int j = 0; j < kThreads; ++j) {
        const double value = prefix[j];
        prefix[j] = running;
        running += value;
      }
      prefix[kThreads] = running;
    }
    __syncthreads();
    double before = prefix[t];
    const double total = prefix[kThreads];
    __syncthreads();
    int found = INT32_MAX;
    for (int i = begin; i < end; ++i) {
      const double w = weight(i);
      const double after = before + w;
      if (visit(i, w, before, after, total) && i < found) found = i;
      before = after;
    }
    found = Reduce<int>(
        kThreads, INT32_MAX, [&](int j) { return j == t ? found : INT32_MAX; },
        [](int a, int b) { return a < b ? a : b; });
    return found == INT32_MAX ? -1 : found;
#else
    return -1;
#endif
  }

  template <class Body>
  TANDEM_HOST_DEVICE void ForEach(int n, Body body) {
#if defined(__CUDA_ARCH__)
    for (int i = threadIdx.x; i < n; i += kThreads) body(i);
    __syncthreads();
#endif
  }

 private:
  double2* scratch_;
};

__global__ void __launch_bounds__(kAcceptThreads) VerifyAcceptKernel(accept::BatchView view) {
  __shared__ double2 scratch[kAcceptThreads + 1];
  DeviceBlock block(scratch);
  accept::AcceptSequence(block, view, static_cast<int>(blockIdx.x));
}

__global__ void __launch_bounds__(kAcceptThreads) SampleDraftsKernel(accept::DraftView view) {
  __shared__ double2 scratch[kAcceptThreads + 1];
  DeviceBlock block(scratch);
  accept::SampleDraftRow(block, view, static_cast<int>(blockIdx.x));
}

bool ValidLogits(const accept::LogitsRef& logits) {
  return logits.data != nullptr && logits.rows > 0 && logits.vocab > 0 && logits.parts > 0 &&
         logits.vocab % logits.parts == 0;
}

}  // namespace

cudaError_t LaunchVerifyAccept(const accept::BatchView& view, cudaStream_t stream) {
  if (view.num_chains == 0) return cudaSuccess;
  if (view.num_chains < 0 || !ValidLogits(view.logits) || view.chains == nullptr ||
      view.q_begin == nullptr || view.parents == nullptr || view.probs == nullptr ||
      view.weights == nullptr || view.node_values == nullptr || view.out_tokens == nullptr ||
      view.out_logprobs == nullptr || view.out_path == nullptr || view.out_status == nullptr) {
    return cudaErrorInvalidValue;
  }
  VerifyAcceptKernel<<<view.num_chains, kAcceptThreads, 0, stream>>>(view);
  return cudaGetLastError();
}

cudaError_t LaunchSampleDrafts(const accept::DraftView& view, cudaStream_t stream) {
  if (view.num_drafts == 0) return cudaSuccess;
  if (view.num_drafts < 0 || !ValidLogits(view.logits) || view.drafts == nullptr ||
      view.probs == nullptr || view.weights == nullptr || view.out_tokens == nullptr ||
      view.out_q_counts == nullptr || view.out_q_ids == nullptr || view.out_q_probs == nullptr) {
    return cudaErrorInvalidValue;
  }
  SampleDraftsKernel<<<view.num_drafts, kAcceptThreads, 0, stream>>>(view);
  return cudaGetLastError();
}

}  // namespace tandem::cuda
