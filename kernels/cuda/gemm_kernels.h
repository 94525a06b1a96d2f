// Matrix multiply with bfloat16 weights and float32 activations on the GPU, batch
// invariant by construction (no cuBLAS; see cuda_backend.h for the cuBLAS mode).
//
// The CUDA kernel tests (kernels/cuda/*_test) check it against the CPU reference when a device
// exists.
#ifndef TANDEM_KERNELS_CUDA_GEMM_KERNELS_H_
#define TANDEM_KERNELS_CUDA_GEMM_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tandem::cuda {

// out[r, o] = sum_k x[r, k] * w[o, k] for r < rows, o < out_dim, k < in_dim.
// x: device float32 [rows, in_dim]; w: device bfloat16 bit patterns [out_dim, in_dim];
// out: device float32 [rows, out_dim], must not overlap x or w.
//
// Reduction order of one output element, fixed by in_dim alone (so a row's result
// never depends on `rows`, on the other rows or on the tile it lands in): thread t of
// 256 walks chunks c = t, t + 256, ... of 8 consecutive k, accumulating with
// round-to-nearest fused multiply-adds in ascending k; the 32 lanes of each warp are
// then added by a butterfly (offsets 16, 8, 4, 2, 1) and the 8 warp sums by the fixed
// tree ((w0+w1)+(w2+w3))+((w4+w5)+(w6+w7)).
// Returns cudaErrorInvalidValue for null pointers or non-positive sizes, else the
// launch error (kernel faults surface at the next synchronisation).
cudaError_t LaunchBf16Gemm(const float* x, int rows, const uint16_t* w, int out_dim, int in_dim,
                           float* out, cudaStream_t stream);

// dst[i] = bfloat16(src[i]) (round to nearest even, NaN stays NaN) for i < n, device
// arrays. Bit-identical to cpu::FloatToBf16. Used for the cuBLAS GEMM inputs.
cudaError_t LaunchF32ToBf16(const float* src, size_t n, uint16_t* dst, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_GEMM_KERNELS_H_
