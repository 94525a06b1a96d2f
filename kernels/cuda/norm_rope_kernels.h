// RMSNorm and rotary position embedding on the GPU (the Backend::RmsNorm and
// Backend::Rope contracts of kernels/backend.h). All pointers are device memory.
//
// The CUDA kernel tests check them against the CPU backend when a device exists.
#ifndef TANDEM_KERNELS_CUDA_NORM_ROPE_KERNELS_H_
#define TANDEM_KERNELS_CUDA_NORM_ROPE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::cuda {

// out[r, i] = w[i] * (x[r, i] * inv_rms), inv_rms = 1 / sqrt(sum_i x[r, i]^2 / dim + eps),
// x, out: float32 [rows, dim] (may alias); w: bfloat16 bits [dim]. One block per row;
// the sum of squares has a fixed order (256 thread-strided sequential FMAs, warp
// butterfly, fixed 8-warp tree; each thread issues 8 loads before their FMAs), so rows
// are independent of each other.
// cudaErrorInvalidValue for null pointers or rows/dim <= 0 (rows == 0 is a no-op).
cudaError_t LaunchRmsNorm(const float* x, const uint16_t* w, int rows, int dim, float eps,
                          float* out, cudaStream_t stream);

// Rotate-half RoPE in place on x: float32 [rows, num_heads * head_dim]; positions: int32
// [rows]; inv_freq: float32 [head_dim / 2]. For pair (j, j + half) with angle
// a = float(position) * inv_freq[j] (a float32 product), c = float(cos(double(a))),
// s = float(sin(double(a))): x1' = x1*c - x2*s, x2' = x2*c + x1*s with separately
// rounded products (no fused multiply-add), the arithmetic of the CPU backend's
// portable path. cudaErrorInvalidValue for an odd or non-positive head_dim or null
// pointers or more than 65535 heads. One block per (row, head).
cudaError_t LaunchRope(float* x, int rows, int num_heads, int head_dim, const int32_t* positions,
                       const float* inv_freq, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_NORM_ROPE_KERNELS_H_
