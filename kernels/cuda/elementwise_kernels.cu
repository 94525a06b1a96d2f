// Element-wise and row-copy kernels (contracts in elementwise_kernels.h).
#include <cstdint>

#include "kernels/cpu/half.h"
#include "kernels/cuda/elementwise_kernels.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 65536;

unsigned BlocksFor(size_t n) {
  const size_t needed = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(needed < kMaxBlocks ? needed : kMaxBlocks);
}

__global__ void SiluMulKernel(const float* __restrict__ gate, const float* __restrict__ up,
                              size_t n, float* out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = gate[i];
    out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), up[i]);
  }
}

__global__ void AddKernel(float* x, const float* y, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    x[i] = __fadd_rn(x[i], y[i]);
  }
}

__global__ void EmbeddingKernel(const uint16_t* __restrict__ table, int dim,
                                const int32_t* __restrict__ tokens, float* __restrict__ out) {
  const int row = blockIdx.x;
  const uint16_t* src = table + size_t(tokens[row]) * dim;
  float* dst = out + size_t(row) * dim;
  for (int i = threadIdx.x; i < dim; i += kThreads) {
    dst[i] = cpu::Bf16ToFloat(src[i]);
  }
}

// `value` as a cache element of E.
template <KvElement E>
__device__ __forceinline__ void StoreKv(void* cache, size_t i, float value) {
  if constexpr (E == KvElement::kF32) {
    static_cast<float*>(cache)[i] = value;
  } else if constexpr (E == KvElement::kF16) {
    static_cast<uint16_t*>(cache)[i] = cpu::FloatToF16(value);
  } else {
    static_cast<uint16_t*>(cache)[i] = cpu::FloatToBf16(value);
  }
}

template <KvElement E>
__global__ void WriteKvKernel(const float* __restrict__ k, const float* __restrict__ v,
                              const int64_t* __restrict__ slots, int width, void* k_cache,
                              void* v_cache) {
  const int row = blockIdx.x;
  const size_t dst = size_t(slots[row]) * width;
  const size_t src = size_t(row) * width;
  for (int i = threadIdx.x; i < width; i += kThreads) {
    StoreKv<E>(k_cache, dst + i, k[src + i]);
    StoreKv<E>(v_cache, dst + i, v[src + i]);
  }
}

}  // namespace

cudaError_t LaunchSiluMul(const float* gate, const float* up, size_t n, float* out,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (gate == nullptr || up == nullptr || out == nullptr) return cudaErrorInvalidValue;
  SiluMulKernel<<<BlocksFor(n), kThreads, 0, stream>>>(gate, up, n, out);
  return cudaGetLastError();
}

cudaError_t LaunchAdd(float* x, const float* y, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (x == nullptr || y == nullptr) return cudaErrorInvalidValue;
  AddKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchEmbedding(const uint16_t* table, int dim, const int32_t* tokens, int rows,
                            float* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (table == nullptr || tokens == nullptr || out == nullptr || rows < 0 || dim <= 0) {
    return cudaErrorInvalidValue;
  }
  EmbeddingKernel<<<rows, kThreads, 0, stream>>>(table, dim, tokens, out);
  return cudaGetLastError();
}

cudaError_t LaunchWriteKv(const float* k, const float* v, const int64_t* slots, int rows, int width,
                          KvElement element, void* k_cache, void* v_cache, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (k == nullptr || v == nullptr || slots == nullptr || k_cache == nullptr ||
      v_cache == nullptr || rows < 0 || width <= 0) {
    return cudaErrorInvalidValue;
  }
  switch (element) {
    case KvElement::kF32:
      WriteKvKernel<KvElement::kF32>
          <<<rows, kThreads, 0, stream>>>(k, v, slots, width, k_cache, v_cache);
      break;
    case KvElement::kF16:
      WriteKvKernel<KvElement::kF16>
          <<<rows, kThreads, 0, stream>>>(k, v, slots, width, k_cache, v_cache);
      break;
    case KvElement::kBF16:
      WriteKvKernel<KvElement::kBF16>
          <<<rows, kThreads, 0, stream>>>(k, v, slots, width, k_cache, v_cache);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace tandem::cuda
