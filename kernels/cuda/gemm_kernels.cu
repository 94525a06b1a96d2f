// Batch-invariant bf16-weight GEMM (see gemm_kernels.h for the reduction order).
//
// Layout: a block of 256 threads computes O consecutive outputs for R consecutive
// rows. Each thread loads O weight chunks (16 bytes each) and R activation chunks per
// step and keeps O x R accumulators; the tile shape (R, O) is picked from the row
// count, which only changes how much work a block does, never the order in which an
// output element is summed. Memory-bound for the small row counts of decode/verify.
#include <cstdint>

#include "kernels/cpu/half.h"
#include "kernels/cuda/gemm_kernels.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 8;  // k elements per chunk: 16 bytes of bf16, 32 of float.
static_assert(kWarps == 8, "the final reduction tree is written for 8 warps");

// 8 bf16 weights w[k .. k+8) of one row as packed bits (zeros past in_dim).
__device__ __forceinline__ uint4 LoadWeightChunk(const uint16_t* __restrict__ row, int k,
                                                 int in_dim, bool vec) {
  if (vec) return __ldg(reinterpret_cast<const uint4*>(row + k));
  uint32_t v[kChunk];
#pragma unroll
  for (int e = 0; e < kChunk; ++e) v[e] = k + e < in_dim ? uint32_t(row[k + e]) : 0u;
  return make_uint4(v[0] | (v[1] << 16), v[2] | (v[3] << 16), v[4] | (v[5] << 16),
                    v[6] | (v[7] << 16));
}

// 8 activations x[k .. k+8) of one row (zeros past in_dim).
__device__ __forceinline__ void LoadActivationChunk(const float* __restrict__ row, int k,
                                                    int in_dim, bool vec, float (&out)[kChunk]) {
  if (vec) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(row + k));
    const float4 b = __ldg(reinterpret_cast<const float4*>(row + k + 4));
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
    return;
  }
#pragma unroll
  for (int e = 0; e < kChunk; ++e) out[e] = k + e < in_dim ? row[k + e] : 0.0f;
}

// Element e (0..7) of a packed chunk as float (exact widening).
__device__ __forceinline__ float Unpack(const uint4& w, int e) {
  const uint32_t word = e < 2 ? w.x : e < 4 ? w.y : e < 6 ? w.z : w.w;
  return __uint_as_float((e & 1) ? (word & 0xffff0000u) : (word << 16));
}

template <int R, int O>
__global__ void __launch_bounds__(kThreads)
    Bf16GemmKernel(const float* __restrict__ x, int rows, const uint16_t* __restrict__ w,
                   int out_dim, int in_dim, float* __restrict__ out, int row_tiles, bool vec) {
  // Row tiles vary fastest so blocks sharing weights run close together (L2 reuse).
  const int row_tile = blockIdx.x % row_tiles;
  const int out_tile = blockIdx.x / row_tiles;
  const int r0 = row_tile * R;
  const int o0 = out_tile * O;
  const int nr = min(R, rows - r0);
  const int no = min(O, out_dim - o0);
  const int chunks = (in_dim + kChunk - 1) / kChunk;

  float acc[O][R];
#pragma unroll
  for (int j = 0; j < O; ++j) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[j][r] = 0.0f;
  }
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    const int k = c * kChunk;
    uint4 wv[O];
#pragma unroll
    for (int j = 0; j < O; ++j) {
      wv[j] = j < no ? LoadWeightChunk(w + size_t(o0 + j) * in_dim, k, in_dim, vec)
                     : make_uint4(0u, 0u, 0u, 0u);
    }
    float xv[R][kChunk];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r < nr) {
        LoadActivationChunk(x + size_t(r0 + r) * in_dim, k, in_dim, vec, xv[r]);
      } else {
#pragma unroll
        for (int e = 0; e < kChunk; ++e) xv[r][e] = 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < O; ++j) {
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        const float wf = Unpack(wv[j], e);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[j][r] = __fmaf_rn(xv[r][e], wf, acc[j][r]);
      }
    }
  }

  __shared__ float warp_sums[O][R][kWarps];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int j = 0; j < O; ++j) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = acc[j][r];
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) {
        v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, offset));
      }
      if (lane == 0) warp_sums[j][r][warp] = v;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < O * R; i += kThreads) {
    const int j = i / R, r = i % R;
    if (j < no && r < nr) {
      const float* s = warp_sums[j][r];
      const float sum = __fadd_rn(__fadd_rn(__fadd_rn(s[0], s[1]), __fadd_rn(s[2], s[3])),
                                  __fadd_rn(__fadd_rn(s[4], s[5]), __fadd_rn(s[6], s[7])));
      out[size_t(r0 + r) * out_dim + (o0 + j)] = sum;
    }
  }
}

template <int R, int O>
cudaError_t LaunchTile(const float* x, int rows, const uint16_t* w, int out_dim, int in_dim,
                       float* out, cudaStream_t stream, bool vec) {
  const long long row_tiles = (rows + R - 1) / R;
  const long long out_tiles = (out_dim + O - 1) / O;
  const long long blocks = row_tiles * out_tiles;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  Bf16GemmKernel<R, O><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      x, rows, w, out_dim, in_dim, out, static_cast<int>(row_tiles), vec);
  return cudaGetLastError();
}

__global__ void F32ToBf16Kernel(const float* __restrict__ src, size_t n,
                                uint16_t* __restrict__ dst) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = cpu::FloatToBf16(src[i]);
  }
}

}  // namespace

cudaError_t LaunchBf16Gemm(const float* x, int rows, const uint16_t* w, int out_dim, int in_dim,
                           float* out, cudaStream_t stream) {
  if (x == nullptr || w == nullptr || out == nullptr || rows <= 0 || out_dim <= 0 || in_dim <= 0) {
    return cudaErrorInvalidValue;
  }
  // 16-byte loads need in_dim % 8 == 0 and aligned bases; the scalar path sums in the
  // same order, so the choice never changes a result.
  const bool vec = in_dim % kChunk == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(w) % 16 == 0;
  // Tiles measured on an H200 (bench/README.md "GPU"): for 3-8 rows, O = 4 outputs a
  // block was 5-8 % faster than O = 8 at 3-6 rows, O = 2 slower everywhere.
  if (rows == 1) return LaunchTile<1, 2>(x, rows, w, out_dim, in_dim, out, stream, vec);
  if (rows == 2) return LaunchTile<2, 2>(x, rows, w, out_dim, in_dim, out, stream, vec);
  if (rows <= 4) return LaunchTile<4, 4>(x, rows, w, out_dim, in_dim, out, stream, vec);
  return LaunchTile<8, 4>(x, rows, w, out_dim, in_dim, out, stream, vec);
}

cudaError_t LaunchF32ToBf16(const float* src, size_t n, uint16_t* dst, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (src == nullptr || dst == nullptr) return cudaErrorInvalidValue;
  constexpr int kBlock = 256;
  const size_t needed = (n + kBlock - 1) / kBlock;
  const unsigned blocks = static_cast<unsigned>(needed < 65536 ? needed : 65536);
  F32ToBf16Kernel<<<blocks, kBlock, 0, stream>>>(src, n, dst);
  return cudaGetLastError();
}

}  // namespace tandem::cuda
