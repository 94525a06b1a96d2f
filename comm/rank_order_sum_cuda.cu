#include <algorithm>

#include "comm/rank_order_sum_cuda.h"

namespace tandem::cuda {
namespace {

__global__ void SumInRankOrderKernel(const float* gathered, int num_ranks, size_t count,
                                     float* out) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += stride) {
    float acc = gathered[e];
    for (int r = 1; r < num_ranks; ++r) {
      // __fadd_rn: an explicit IEEE add that the compiler may not fuse or reorder.
      acc = __fadd_rn(acc, gathered[static_cast<size_t>(r) * count + e]);
    }
    out[e] = acc;
  }
}

}  // namespace

cudaError_t LaunchSumInRankOrder(const float* gathered, int num_ranks, size_t count, float* out,
                                 cudaStream_t stream) {
  if (count == 0 || num_ranks <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const size_t needed = (count + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(std::min<size_t>(needed, 4096));
  SumInRankOrderKernel<<<blocks, kThreads, 0, stream>>>(gathered, num_ranks, count, out);
  return cudaGetLastError();
}

}  // namespace tandem::cuda
