// Matrix multiply with block-quantized weights (q8_0, q4_0; layouts in kernels/backend.h)
// on the GPU: the same integer math, in the same order, as the CPU backend's
// kernels/cpu/quantized_matmul.h, so a CUDA result is bitwise the CPU result and a row's
// result never depends on the other rows (batch invariant).
//
// The CUDA kernel tests (kernels/cuda/quantized_gemm_test) check it bitwise against the CPU backend
// when a device exists (tools/gpu_check.sh).
#ifndef TANDEM_KERNELS_CUDA_QUANTIZED_GEMM_KERNELS_H_
#define TANDEM_KERNELS_CUDA_QUANTIZED_GEMM_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::cuda {

// Quantizes activation rows x [rows, cols] (device float32) per block of 32 values
// exactly as cpu::QuantizeRows: a block with max |x| = m gets the scale d = m / 127 and
// the quants q = round-to-nearest-even(x * (1 / d)) clamped to [-127, 127]; d = 0 and
// zero quants when m = 0 or 1 / d overflows; d = NaN and zero quants when the block holds
// a NaN or an infinity. `quants` (device int8 [rows, blocks * 32], blocks =
// ceil(cols / 32), padded with zeros) and `scales` (device float32 [rows, blocks]).
// cudaErrorInvalidValue for null pointers or non-positive sizes, else the launch error.
cudaError_t LaunchQuantizeRows(const float* x, int rows, int cols, int8_t* quants, float* scales,
                               cudaStream_t stream);

// out[r, o] = sum over the blocks b of row o of a q8_0 (`q4 = false`: `weights` int8
// [out_dim, in_dim]) or q4_0 (`q4 = true`: `weights` packed nibbles [out_dim,
// ceil(in_dim / 2)]) weight with f16 `weight_scales` [out_dim, blocks], times the
// activations quantized by LaunchQuantizeRows (`x_quants`, `x_scales` of `rows` rows of
// in_dim values). `out`: device float32 [rows, out_dim].
//
// Order of one output element (cpu::QuantizedMatMulRange's): for each block b in order,
// the exact int32 dot product s_b of its 32 weight and activation quants (8 threads'
// dp4a of 4 positions each, added across the threads by shuffles) is accumulated as
// acc = fma(float(s_b), d_w(b) * d_x(b), acc) from 0; the output is acc.
// cudaErrorInvalidValue for null pointers or non-positive sizes, else the launch error.
cudaError_t LaunchQuantizedGemm(const int8_t* x_quants, const float* x_scales, int rows,
                                const void* weights, const uint16_t* weight_scales, bool q4,
                                int out_dim, int in_dim, float* out, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_QUANTIZED_GEMM_KERNELS_H_
