// RMSNorm and RoPE kernels (contracts in norm_rope_kernels.h).
#include <cstdint>

#include "kernels/cuda/norm_rope_kernels.h"

namespace tandem::cuda {
namespace {

constexpr int kNormThreads = 256;
constexpr int kNormWarps = kNormThreads / 32;
static_assert(kNormWarps == 8, "the final reduction tree is written for 8 warps");
constexpr int kBatch = 8;  // Loads in flight per thread in RmsNormKernel.
constexpr int kRopeThreads = 64;

__device__ __forceinline__ float Bf16Bits(uint16_t bits) {
  return __uint_as_float(uint32_t(bits) << 16);
}

__global__ void __launch_bounds__(kNormThreads)
    RmsNormKernel(const float* x, const uint16_t* __restrict__ w, int dim, float eps, float* out) {
  const size_t base = size_t(blockIdx.x) * dim;
  // Each thread's values in the order i = t, t + 256, ...; kBatch loads are issued
  // before their FMAs so a single row is not bound by one load's latency at a time.
  float sum = 0.0f;
  int i = threadIdx.x;
  for (; i + (kBatch - 1) * kNormThreads < dim; i += kBatch * kNormThreads) {
    float v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) v[u] = x[base + i + u * kNormThreads];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) sum = __fmaf_rn(v[u], v[u], sum);
  }
  for (; i < dim; i += kNormThreads) {
    const float v = x[base + i];
    sum = __fmaf_rn(v, v, sum);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, offset));
  }
  __shared__ float warp_sums[kNormWarps];
  __shared__ float inv_rms;
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    const float* s = warp_sums;
    const float total = __fadd_rn(__fadd_rn(__fadd_rn(s[0], s[1]), __fadd_rn(s[2], s[3])),
                                  __fadd_rn(__fadd_rn(s[4], s[5]), __fadd_rn(s[6], s[7])));
    inv_rms = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(total, float(dim)), eps)));
  }
  __syncthreads();
  const float scale = inv_rms;
  // x and out may alias: each element is read and written by the same thread only.
  i = threadIdx.x;
  for (; i + (kBatch - 1) * kNormThreads < dim; i += kBatch * kNormThreads) {
    float v[kBatch], g[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      v[u] = x[base + i + u * kNormThreads];
      g[u] = Bf16Bits(w[i + u * kNormThreads]);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      out[base + i + u * kNormThreads] = __fmul_rn(g[u], __fmul_rn(v[u], scale));
    }
  }
  for (; i < dim; i += kNormThreads) {
    out[base + i] = __fmul_rn(Bf16Bits(w[i]), __fmul_rn(x[base + i], scale));
  }
}

__global__ void __launch_bounds__(kRopeThreads)
    RopeKernel(float* x, int num_heads, int head_dim, const int32_t* __restrict__ positions,
               const float* __restrict__ inv_freq) {
  const int row = blockIdx.x, h = blockIdx.y;
  const int half = head_dim / 2;
  const float position = float(positions[row]);
  for (int j = threadIdx.x; j < half; j += kRopeThreads) {
    const float angle = __fmul_rn(position, inv_freq[j]);
    const float c = float(cos(double(angle)));
    const float s = float(sin(double(angle)));
    float* x1 = x + (size_t(row) * num_heads + h) * head_dim + j;
    float* x2 = x1 + half;
    const float a = *x1, b = *x2;
    *x1 = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    *x2 = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  }
}

}  // namespace

cudaError_t LaunchRmsNorm(const float* x, const uint16_t* w, int rows, int dim, float eps,
                          float* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || w == nullptr || out == nullptr || rows < 0 || dim <= 0) {
    return cudaErrorInvalidValue;
  }
  RmsNormKernel<<<rows, kNormThreads, 0, stream>>>(x, w, dim, eps, out);
  return cudaGetLastError();
}

cudaError_t LaunchRope(float* x, int rows, int num_heads, int head_dim, const int32_t* positions,
                       const float* inv_freq, cudaStream_t stream) {
  if (rows == 0 || num_heads == 0) return cudaSuccess;
  if (x == nullptr || positions == nullptr || inv_freq == nullptr || rows < 0 || num_heads < 0 ||
      head_dim <= 0 || head_dim % 2 != 0) {
    return cudaErrorInvalidValue;
  }
  if (num_heads > 65535) return cudaErrorInvalidValue;
  RopeKernel<<<dim3(rows, num_heads), kRopeThreads, 0, stream>>>(x, num_heads, head_dim, positions,
                                                                 inv_freq);
  return cudaGetLastError();
}

}  // namespace tandem::cuda
