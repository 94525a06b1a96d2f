// Batch-invariant q8_0 / q4_0 GEMM (order in quantized_gemm_kernels.h).
//
// Layout: a block of 256 threads computes 32 consecutive outputs for R consecutive rows;
// the 8 threads of an output are its 8 lanes, each walking every weight block of the
// row: a lane's dp4a of its 4 positions, the block sum by shuffles across the 8 lanes,
// then R accumulators (the same in every lane). The row tile R (picked from the row count) only
// changes how many rows share a weight load, never the order an element is summed in.
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/quantized_gemm_kernels.h"

namespace tandem::cuda {
namespace {

constexpr int kBlock = 32;  // Values per quantization block (kQ8BlockSize).
constexpr int kLanes = 8;   // Threads per output; lane j takes positions 4j..4j+3 of a block.
constexpr int kThreads = 256;
constexpr int kOutputsPerBlock = kThreads / kLanes;

__device__ __forceinline__ float HalfBits(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

// ---- activation quantization (one thread per block of 32 values of a row) ----

__global__ void QuantizeRowsKernel(const float* __restrict__ x, int rows, int cols, int blocks,
                                   int8_t* __restrict__ quants, float* __restrict__ scales) {
  const long long index = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= (long long)rows * blocks) return;
  const int r = static_cast<int>(index / blocks), b = static_cast<int>(index % blocks);
  const int k0 = b * kBlock, n = min(kBlock, cols - k0);
  const float* v = x + (size_t)r * cols + k0;
  float max_abs = 0.0f;
  bool finite = true;
  for (int i = 0; i < n; ++i) {
    const float a = fabsf(v[i]);
    finite = finite && a < __int_as_float(0x7f800000);  // False for NaN and infinity.
    max_abs = a > max_abs ? a : max_abs;
  }
  float scale = 0.0f, inverse = 0.0f;
  if (!finite) {
    scale = __int_as_float(0x7fc00000);  // NaN; the quants stay zero.
  } else {
    scale = __fdiv_rn(max_abs, 127.0f);
    inverse = max_abs != 0.0f ? __fdiv_rn(1.0f, scale) : 0.0f;
    if (!(inverse <= 3.402823466e38f)) scale = inverse = 0.0f;  // 1 / d overflowed.
  }
  scales[(size_t)r * blocks + b] = scale;
  int8_t* q = quants + ((size_t)r * blocks + b) * kBlock;
  for (int i = 0; i < kBlock; ++i) {
    float rounded = 0.0f;
    if (finite && i < n) rounded = fminf(fmaxf(rintf(__fmul_rn(v[i], inverse)), -127.0f), 127.0f);
    q[i] = static_cast<int8_t>(rounded);
  }
}

// ---- weight lanes: the 4 int8 values at positions 4j..4j+3 of block b of a row ----

// Packs 4 int8 values into the word __dp4a reads (value 0 in the low byte).
__device__ __forceinline__ int Pack4(int v0, int v1, int v2, int v3) {
  return (v0 & 0xff) | ((v1 & 0xff) << 8) | ((v2 & 0xff) << 16) | ((v3 & 0xff) << 24);
}

struct Q8Lanes {
  const int8_t* __restrict__ quants;  // [out_dim, in_dim]
  int in_dim;
  bool aligned;  // 4-byte loads are legal (in_dim % 4 == 0, aligned base).
  __device__ __forceinline__ int Load(int o, int b, int j) const {
    const int k = b * kBlock + 4 * j;
    const int8_t* p = quants + (size_t)o * in_dim + k;
    if (aligned && k + 4 <= in_dim) return __ldg(reinterpret_cast<const int*>(p));
    int v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = k + e < in_dim ? p[e] : 0;
    return Pack4(v[0], v[1], v[2], v[3]);
  }
};

struct Q4Lanes {
  const uint8_t* __restrict__ packed;  // [out_dim, row_bytes]
  int in_dim;
  long long row_bytes;
  bool aligned;  // 4-byte loads are legal (row_bytes % 4 == 0, aligned base).
  // Value i of a block of n values at `bytes` (layout in kernels/backend.h), 0 past n.
  static __device__ __forceinline__ int Value(const uint8_t* bytes, int n, int i) {
    if (i >= n) return 0;
    const int half = (n + 1) / 2;
    return i < half ? (bytes[i] & 15) - 8 : (bytes[i - half] >> 4) - 8;
  }
  __device__ __forceinline__ int Load(int o, int b, int j) const {
    const uint8_t* bytes = packed + (size_t)o * row_bytes + (size_t)b * (kBlock / 2);
    const int n = min(kBlock, in_dim - b * kBlock);
    if (aligned && n == kBlock) {
      // Full block: values 0..15 are the low nibbles of bytes 0..15, 16..31 the high.
      const unsigned word = __ldg(reinterpret_cast<const unsigned*>(bytes + 4 * (j & 3)));
      const unsigned nibbles = (j < 4 ? word : word >> 4) & 0x0f0f0f0fu;
      return static_cast<int>(__vsub4(nibbles, 0x08080808u));
    }
    const int i = 4 * j;
    return Pack4(Value(bytes, n, i), Value(bytes, n, i + 1), Value(bytes, n, i + 2),
                 Value(bytes, n, i + 3));
  }
};

template <int R, typename Lanes>
__global__ void __launch_bounds__(kThreads)
    QuantizedGemmKernel(const int8_t* __restrict__ x_quants, const float* __restrict__ x_scales,
                        int rows, Lanes weights, const uint16_t* __restrict__ weight_scales,
                        int out_dim, int blocks, float* __restrict__ out) {
  const int lane = threadIdx.x % kLanes;
  const int o = blockIdx.x * kOutputsPerBlock + threadIdx.x / kLanes;
  const int r0 = blockIdx.y * R;
  const int nr = min(R, rows - r0);
  const bool active = o < out_dim;
  // Threads past the matrix read its last output, so every lane of the warp joins the
  // shuffles (the loops below are uniform); only the store is skipped.
  const int read = active ? o : out_dim - 1;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int b = 0; b < blocks; ++b) {
    const int w = weights.Load(read, b, lane);
    const float dw = HalfBits(__ldg(weight_scales + (size_t)read * blocks + b));
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;
      const size_t row = (size_t)(r0 + r) * blocks + b;
      const int xv = __ldg(reinterpret_cast<const int*>(x_quants + row * kBlock + 4 * lane));
      // The block sum: the 8 lanes' exact int32 partials added across the lanes (integer
      // addition, so in any order), every lane ending with it.
      int sum = __dp4a(w, xv, 0);
      sum += __shfl_xor_sync(0xffffffffu, sum, 4, kLanes);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2, kLanes);
      sum += __shfl_xor_sync(0xffffffffu, sum, 1, kLanes);
      const float d = __fmul_rn(dw, __ldg(x_scales + row));
      acc[r] = __fmaf_rn(__int2float_rn(sum), d, acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (active && lane == 0 && r < nr) out[(size_t)(r0 + r) * out_dim + o] = acc[r];
  }
}

template <int R, typename Lanes>
cudaError_t LaunchRows(const int8_t* x_quants, const float* x_scales, int rows,
                       const Lanes& weights, const uint16_t* weight_scales, int out_dim, int blocks,
                       float* out, cudaStream_t stream) {
  const long long row_tiles = (rows + R - 1) / R;
  const long long out_tiles = (out_dim + kOutputsPerBlock - 1) / kOutputsPerBlock;
  if (row_tiles > 65535 || out_tiles > 0x7fffffffLL) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(out_tiles), static_cast<unsigned>(row_tiles));
  QuantizedGemmKernel<R, Lanes><<<grid, kThreads, 0, stream>>>(x_quants, x_scales, rows, weights,
                                                               weight_scales, out_dim, blocks, out);
  return cudaGetLastError();
}

template <typename Lanes>
cudaError_t LaunchTiled(const int8_t* x_quants, const float* x_scales, int rows,
                        const Lanes& weights, const uint16_t* weight_scales, int out_dim,
                        int blocks, float* out, cudaStream_t stream) {
  if (rows == 1) {
    return LaunchRows<1>(x_quants, x_scales, rows, weights, weight_scales, out_dim, blocks, out,
                         stream);
  }
  if (rows <= 4) {
    return LaunchRows<4>(x_quants, x_scales, rows, weights, weight_scales, out_dim, blocks, out,
                         stream);
  }
  return LaunchRows<8>(x_quants, x_scales, rows, weights, weight_scales, out_dim, blocks, out,
                       stream);
}

}  // namespace

cudaError_t LaunchQuantizeRows(const float* x, int rows, int cols, int8_t* quants, float* scales,
                               cudaStream_t stream) {
  if (x == nullptr || quants == nullptr || scales == nullptr || rows <= 0 || cols <= 0) {
    return cudaErrorInvalidValue;
  }
  const int blocks = (cols + kBlock - 1) / kBlock;
  const long long threads = (long long)rows * blocks;
  constexpr int kPerBlock = 128;
  const long long grid = (threads + kPerBlock - 1) / kPerBlock;
  if (grid > 0x7fffffffLL) return cudaErrorInvalidValue;
  QuantizeRowsKernel<<<static_cast<unsigned>(grid), kPerBlock, 0, stream>>>(x, rows, cols, blocks,
                                                                            quants, scales);
  return cudaGetLastError();
}

cudaError_t LaunchQuantizedGemm(const int8_t* x_quants, const float* x_scales, int rows,
                                const void* weights, const uint16_t* weight_scales, bool q4,
                                int out_dim, int in_dim, float* out, cudaStream_t stream) {
  if (x_quants == nullptr || x_scales == nullptr || weights == nullptr ||
      weight_scales == nullptr || out == nullptr || rows <= 0 || out_dim <= 0 || in_dim <= 0) {
    return cudaErrorInvalidValue;
  }
  const int blocks = (in_dim + kBlock - 1) / kBlock;
  const bool base_aligned = reinterpret_cast<uintptr_t>(weights) % 4 == 0;
  if (q4) {
    const long long row_bytes = (in_dim + 1) / 2;
    const Q4Lanes lanes{static_cast<const uint8_t*>(weights), in_dim, row_bytes,
                        base_aligned && row_bytes % 4 == 0};
    return LaunchTiled(x_quants, x_scales, rows, lanes, weight_scales, out_dim, blocks, out,
                       stream);
  }
  const Q8Lanes lanes{static_cast<const int8_t*>(weights), in_dim, base_aligned && in_dim % 4 == 0};
  return LaunchTiled(x_quants, x_scales, rows, lanes, weight_scales, out_dim, blocks, out, stream);
}

}  // namespace tandem::cuda
