// Softmax and argmax kernels (contracts in sampling_kernels.h).
#include "kernels/cuda/sampling_kernels.h"

#include <cmath>
#include <cstdint>

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
static_assert(kWarps == 8, "the reduction trees are written for 8 warps");

__device__ __forceinline__ float TreeSum8(const float* s) {
  return __fadd_rn(__fadd_rn(__fadd_rn(s[0], s[1]), __fadd_rn(s[2], s[3])),
                   __fadd_rn(__fadd_rn(s[4], s[5]), __fadd_rn(s[6], s[7])));
}

// Block-wide reductions; every thread gets the result. `scratch` holds kWarps floats.
__device__ float BlockMax(float v, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < kWarps; ++w) m = fmaxf(m, scratch[w]);
  __syncthreads();
  return m;
}

__device__ float BlockSum(float v, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  const float total = TreeSum8(scratch);
  __syncthreads();
  return total;
}

__global__ void __launch_bounds__(kThreads)
    SoftmaxKernel(const float* logits, int cols, float temperature, float* probs) {
  __shared__ float scratch[kWarps];
  const size_t base = size_t(blockIdx.x) * cols;
  float m = -INFINITY;  // fmaxf skips NaN.
  for (int i = threadIdx.x; i < cols; i += kThreads) {
    m = fmaxf(m, __fdiv_rn(logits[base + i], temperature));
  }
  m = BlockMax(m, scratch);
  const bool infinite = isinf(m);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < cols; i += kThreads) {
    const float z = __fdiv_rn(logits[base + i], temperature);
    float e;
    if (isnan(z)) {
      e = 0.0f;
    } else if (infinite) {
      e = z == m ? 1.0f : 0.0f;
    } else {
      e = expf(__fsub_rn(z, m));
    }
    probs[base + i] = e;
    sum = __fadd_rn(sum, e);
  }
  sum = BlockSum(sum, scratch);
  for (int i = threadIdx.x; i < cols; i += kThreads) {
    probs[base + i] = sum > 0.0f ? __fdiv_rn(probs[base + i], sum) : 0.0f;
  }
}

// (value, index) order for argmax: a valid entry beats -1; larger value wins; equal
// values go to the lower index.
__device__ __forceinline__ bool Better(float v, int i, float best_v, int best_i) {
  if (i < 0) return false;
  if (best_i < 0) return true;
  return v > best_v || (v == best_v && i < best_i);
}

__global__ void __launch_bounds__(kThreads)
    ArgmaxKernel(const float* __restrict__ logits, int cols, int32_t* __restrict__ out) {
  __shared__ float best_values[kThreads];
  __shared__ int best_indices[kThreads];
  const size_t base = size_t(blockIdx.x) * cols;
  float best_v = 0.0f;
  int best_i = -1;
  for (int i = threadIdx.x; i < cols; i += kThreads) {
    const float v = logits[base + i];
    if (!isnan(v) && Better(v, i, best_v, best_i)) {
      best_v = v;
      best_i = i;
    }
  }
  best_values[threadIdx.x] = best_v;
  best_indices[threadIdx.x] = best_i;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      const float v = best_values[threadIdx.x + stride];
      const int i = best_indices[threadIdx.x + stride];
      if (Better(v, i, best_values[threadIdx.x], best_indices[threadIdx.x])) {
        best_values[threadIdx.x] = v;
        best_indices[threadIdx.x] = i;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = best_indices[0];
}

}  // namespace

cudaError_t LaunchSoftmax(const float* logits, int rows, int cols, float temperature,
                          float* probs, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (logits == nullptr || probs == nullptr || rows < 0 || cols <= 0 ||
      !(temperature > 0.0f) || std::isinf(temperature)) {
    return cudaErrorInvalidValue;
  }
  SoftmaxKernel<<<rows, kThreads, 0, stream>>>(logits, cols, temperature, probs);
  return cudaGetLastError();
}

cudaError_t LaunchArgmax(const float* logits, int rows, int cols, int32_t* out,
                         cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (logits == nullptr || out == nullptr || rows < 0 || cols <= 0) {
    return cudaErrorInvalidValue;
  }
  ArgmaxKernel<<<rows, kThreads, 0, stream>>>(logits, cols, out);
  return cudaGetLastError();
}

}  // namespace tandem::cuda
