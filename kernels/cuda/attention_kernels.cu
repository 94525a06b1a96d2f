// Paged attention kernels (see attention_kernels.h for the contract and the order of
// every reduction). Block shape: 128 threads; one block per (key chunk, KV head,
// group of <= 2 query heads): a key and value vector is read by every block of its
// KV head's query groups (from L2 after the first), which buys 4x the blocks of
// one per KV head for a single decode row (on an H200, a 70B rank's decode attention
// at context 1024 had 34 blocks on 132 SMs and took 40 us a layer with 8 heads a block).
#include <cmath>
#include <cstdint>

#include "kernels/cpu/half.h"
#include "kernels/cuda/attention_kernels.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kHeadsPerBlock = 2;
constexpr int kChunk = kAttentionChunkKeys;
constexpr int kMaxDim = kAttentionMaxHeadDim;
constexpr int kDimPerLane = kMaxDim / 32;
constexpr int kKeysPerWarpStep = 4;  // Keys a warp loads before computing (memory parallelism).

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Element i of a cache of E, widened exactly to float32.
template <KvElement E>
__device__ __forceinline__ float LoadKv(const void* cache, size_t i) {
  if constexpr (E == KvElement::kF32) {
    return static_cast<const float*>(cache)[i];
  } else if constexpr (E == KvElement::kF16) {
    return cpu::F16ToFloat(static_cast<const uint16_t*>(cache)[i]);
  } else {
    return cpu::Bf16ToFloat(static_cast<const uint16_t*>(cache)[i]);
  }
}

template <KvElement E>
__global__ void __launch_bounds__(kThreads) AttentionChunkKernel(AttentionParams p) {
  const int chunk = blockIdx.x;
  const int row = p.chunk_row[chunk];
  const int chunk_in_row = chunk - p.row_chunk_begin[row];
  const int group = p.num_heads / p.num_kv_heads;
  const int subgroups = (group + kHeadsPerBlock - 1) / kHeadsPerBlock;
  const int kv_head = blockIdx.y / subgroups;
  const int first_in_group = (blockIdx.y % subgroups) * kHeadsPerBlock;
  const int head0 = kv_head * group + first_in_group;
  const int nh = min(kHeadsPerBlock, group - first_in_group);
  const int hd = p.head_dim;
  const int prefix = p.row_prefix[row];
  const int extra0 = p.row_extra_begin[row];
  const int total = prefix + (p.row_extra_begin[row + 1] - extra0);
  const int n0 = chunk_in_row * kChunk;
  const int nk = min(kChunk, total - n0);
  if (nk <= 0) return;  // Not produced by a valid plan.
  const int32_t* table = p.block_tables + p.row_table_offset[row];
  const size_t slot_stride = size_t(p.num_kv_heads) * hd;  // Elements per cache slot.
  const size_t kv_offset = size_t(kv_head) * hd;

  __shared__ float q_s[kHeadsPerBlock][kMaxDim];
  __shared__ float p_s[kHeadsPerBlock][kChunk];
  __shared__ int64_t slot_s[kChunk];

  for (int i = threadIdx.x; i < nh * hd; i += kThreads) {
    const int g = i / hd, d = i % hd;
    q_s[g][d] = p.q[(size_t(row) * p.num_heads + head0 + g) * hd + d];
  }
  for (int t = threadIdx.x; t < nk; t += kThreads) {
    const int n = n0 + t;
    const int logical = n < prefix ? n : p.extra_keys[extra0 + (n - prefix)];
    slot_s[t] = int64_t(table[logical / p.block_size]) * p.block_size + logical % p.block_size;
  }
  __syncthreads();

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  // Scores: each warp loads kKeysPerWarpStep keys, then forms their dot products with
  // every query head of the block.
  for (int t0 = warp * kKeysPerWarpStep; t0 < nk; t0 += kWarps * kKeysPerWarpStep) {
    float kv[kKeysPerWarpStep][kDimPerLane];
#pragma unroll
    for (int u = 0; u < kKeysPerWarpStep; ++u) {
      const int t = t0 + u;
      const size_t key = t < nk ? slot_s[t] * slot_stride + kv_offset : 0;
#pragma unroll
      for (int i = 0; i < kDimPerLane; ++i) {
        const int d = lane + 32 * i;
        kv[u][i] = (t < nk && d < hd) ? LoadKv<E>(p.k_cache, key + d) : 0.0f;
      }
    }
#pragma unroll
    for (int g = 0; g < kHeadsPerBlock; ++g) {
      if (g >= nh) break;  // Uniform across the block.
#pragma unroll
      for (int u = 0; u < kKeysPerWarpStep; ++u) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < kDimPerLane; ++i) {
          const int d = lane + 32 * i;
          if (d < hd) dot = __fmaf_rn(q_s[g][d], kv[u][i], dot);
        }
        dot = WarpSum(dot);
        if (lane == 0 && t0 + u < nk) p_s[g][t0 + u] = __fmul_rn(dot, p.scale);
      }
    }
  }
  __syncthreads();

  // Per head: chunk max, exponentials (in place) and their sum.
  for (int g = warp; g < nh; g += kWarps) {
    float m = -INFINITY;
    for (int t = lane; t < nk; t += 32) m = fmaxf(m, p_s[g][t]);
    m = WarpMax(m);
    float l = 0.0f;
    for (int t = lane; t < nk; t += 32) {
      const float e = expf(__fsub_rn(p_s[g][t], m));
      p_s[g][t] = e;
      l = __fadd_rn(l, e);
    }
    l = WarpSum(l);
    if (lane == 0) {
      float* ms = p.partial_max_sum + (size_t(chunk) * p.num_heads + head0 + g) * 2;
      ms[0] = m;
      ms[1] = l;
    }
  }
  __syncthreads();

  // Unnormalised value sums, keys in ascending order.
  for (int d = threadIdx.x; d < hd; d += kThreads) {
    float acc[kHeadsPerBlock];
#pragma unroll
    for (int g = 0; g < kHeadsPerBlock; ++g) acc[g] = 0.0f;
#pragma unroll 8
    for (int t = 0; t < nk; ++t) {
      const float v = LoadKv<E>(p.v_cache, slot_s[t] * slot_stride + kv_offset + d);
#pragma unroll
      for (int g = 0; g < kHeadsPerBlock; ++g) {
        if (g < nh) acc[g] = __fmaf_rn(p_s[g][t], v, acc[g]);
      }
    }
#pragma unroll
    for (int g = 0; g < kHeadsPerBlock; ++g) {
      if (g < nh) p.partial_acc[(size_t(chunk) * p.num_heads + head0 + g) * hd + d] = acc[g];
    }
  }
}

__global__ void __launch_bounds__(kThreads) AttentionCombineKernel(AttentionParams p) {
  const int row = blockIdx.x;
  const int h = blockIdx.y;
  const int c0 = p.row_chunk_begin[row];
  const int nc = p.row_chunk_begin[row + 1] - c0;
  const int hd = p.head_dim;
  float* out = p.out + (size_t(row) * p.num_heads + h) * hd;
  const float* ms = p.partial_max_sum + (size_t(c0) * p.num_heads + h) * 2;
  const size_t ms_stride = size_t(p.num_heads) * 2;
  float m = -INFINITY;
  for (int c = 0; c < nc; ++c) m = fmaxf(m, ms[c * ms_stride]);
  float denom = 0.0f;
  for (int c = 0; c < nc; ++c) {
    denom = __fmaf_rn(expf(__fsub_rn(ms[c * ms_stride], m)), ms[c * ms_stride + 1], denom);
  }
  const float* acc = p.partial_acc + (size_t(c0) * p.num_heads + h) * hd;
  const size_t acc_stride = size_t(p.num_heads) * hd;
  for (int d = threadIdx.x; d < hd; d += kThreads) {
    float num = 0.0f;
    for (int c = 0; c < nc; ++c) {
      num = __fmaf_rn(expf(__fsub_rn(ms[c * ms_stride], m)), acc[c * acc_stride + d], num);
    }
    out[d] = nc > 0 ? __fdiv_rn(num, denom) : 0.0f;
  }
}

}  // namespace

cudaError_t LaunchPagedAttention(const AttentionParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.rows < 0 || p.num_heads <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0 ||
      p.head_dim <= 0 || p.head_dim > kAttentionMaxHeadDim || p.block_size <= 0 ||
      p.total_chunks < p.rows || p.q == nullptr || p.k_cache == nullptr || p.v_cache == nullptr ||
      p.out == nullptr || p.block_tables == nullptr || p.row_table_offset == nullptr ||
      p.row_prefix == nullptr || p.row_extra_begin == nullptr || p.row_chunk_begin == nullptr ||
      p.chunk_row == nullptr || p.partial_acc == nullptr || p.partial_max_sum == nullptr) {
    return cudaErrorInvalidValue;
  }
  const int group = p.num_heads / p.num_kv_heads;
  const long long blocks_y =
      static_cast<long long>(p.num_kv_heads) * ((group + kHeadsPerBlock - 1) / kHeadsPerBlock);
  if (blocks_y > 65535 || p.num_heads > 65535) return cudaErrorInvalidValue;
  const dim3 chunk_grid(p.total_chunks, static_cast<unsigned>(blocks_y));
  switch (p.kv_element) {
    case KvElement::kF32:
      AttentionChunkKernel<KvElement::kF32><<<chunk_grid, kThreads, 0, stream>>>(p);
      break;
    case KvElement::kF16:
      AttentionChunkKernel<KvElement::kF16><<<chunk_grid, kThreads, 0, stream>>>(p);
      break;
    case KvElement::kBF16:
      AttentionChunkKernel<KvElement::kBF16><<<chunk_grid, kThreads, 0, stream>>>(p);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  AttentionCombineKernel<<<dim3(p.rows, p.num_heads), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace tandem::cuda
