// Element-wise and row-copy kernels on the GPU: SiLU-gated product, in-place add,
// embedding lookup from a bfloat16 table, and the KV cache write. All pointers are
// device memory; every launcher returns cudaErrorInvalidValue for null pointers or
// negative sizes and otherwise the launch error.
//
// The CUDA kernel tests check them against the CPU backend when a device exists.
#ifndef TANDEM_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_
#define TANDEM_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/attention_kernels.h"

namespace tandem::cuda {

// out[i] = gate[i] / (1 + exp(-gate[i])) * up[i] for i < n (float32).
cudaError_t LaunchSiluMul(const float* gate, const float* up, size_t n, float* out,
                          cudaStream_t stream);

// x[i] += y[i] for i < n (float32, one rounded add: bit-identical to the CPU backend).
cudaError_t LaunchAdd(float* x, const float* y, size_t n, cudaStream_t stream);

// out[r, :] = float(table[tokens[r], :]) for r < rows; table: bfloat16 bits
// [vocab, dim]; tokens: int32 [rows], each in [0, vocab) (the caller checks).
cudaError_t LaunchEmbedding(const uint16_t* table, int dim, const int32_t* tokens, int rows,
                            float* out, cudaStream_t stream);

// k_cache[slots[r], :] = k[r, :] and v_cache[slots[r], :] = v[r, :] for r < rows, rows
// of `width` floats stored as `element` (16-bit: rounded by cpu::FloatToF16 /
// cpu::FloatToBf16, bitwise the CPU backend's cache); slots: int64 [rows], each a
// valid slot (the caller checks).
cudaError_t LaunchWriteKv(const float* k, const float* v, const int64_t* slots, int rows, int width,
                          KvElement element, void* k_cache, void* v_cache, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_
