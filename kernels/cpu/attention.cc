#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "glog/logging.h"
#include "kernels/cpu/kv_readers.h"
#include "kernels/cpu/vec_math.h"

namespace tandem {
namespace cpu {
namespace {

// Smallest share of multiply-adds worth handing to another thread.
constexpr int64_t kMinFmaPerThread = 1 << 15;

// Keys per chunk of the AVX2 path: a chunk's keys and values stay in L1 while every
// query head of the group passes over them. Even, so the even/odd value chains below
// do not depend on the chunking.
constexpr int kKeyChunk = 64;

// The inputs of one (row, KV head) task: the `heads` query heads that share the KV head.
template <typename KV>
struct GroupTask {
  using T = typename KV::T;
  const float* q;          // [heads, head_dim]
  const T* k_base;         // k_cache + kv_head * head_dim
  const T* v_base;         // v_cache + kv_head * head_dim
  const int64_t* offsets;  // [n] element offset of each key's slot, logical order
  int n;
  int heads;
  int head_dim;
  float scale;
  float* scores;         // scratch [heads, score_stride]
  int64_t score_stride;  // >= n rounded up to 8
  float* acc;            // scratch [heads, 2, acc_stride] (AVX2 value sums)
  int64_t acc_stride;    // head_dim rounded up to 8
  float* out;            // [heads, head_dim]
};

template <typename KV>
void AttendPortable(const GroupTask<KV>& t) {
  const int hd = t.head_dim;
  for (int g = 0; g < t.heads; ++g) {
    const float* q = t.q + size_t(g) * hd;
    float* scores = t.scores;
    float* out = t.out + size_t(g) * hd;
    float max = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < t.n; ++j) {
      const auto* k = t.k_base + t.offsets[j];
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int d = 0;
      for (; d + 8 <= hd; d += 8) {
        for (int l = 0; l < 8; ++l) acc[l] += q[d + l] * KV::At(k + d + l);
      }
      for (int l = 0; d + l < hd; ++l) acc[l] += q[d + l] * KV::At(k + d + l);
      scores[j] = ReduceTree8(acc) * t.scale;
      max = std::max(max, scores[j]);
    }
    float sum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < t.n; ++j) {
      scores[j] = std::exp(scores[j] - max);
      sum[j % 8] += scores[j];
    }
    const float inv_sum = 1.0f / ReduceTree8(sum);
    for (int d = 0; d < hd; ++d) out[d] = 0.0f;
    for (int j = 0; j < t.n; ++j) {
      const auto* v = t.v_base + t.offsets[j];
      const float p = scores[j];
      for (int d = 0; d < hd; ++d) out[d] += p * KV::At(v + d);
    }
    for (int d = 0; d < hd; ++d) out[d] *= inv_sum;
  }
}

#if defined(TANDEM_HAVE_AVX2_KERNELS)

// Loads 8 floats at p, or (kFull = false) only the first `left` of them.
template <bool kFull>
TANDEM_AVX2 inline __m256 Load8(const float* p, int64_t left) {
  return kFull ? _mm256_loadu_ps(p) : LoadPartial(p, left);
}

// The same for 8 cache values widened to float32.
template <typename KV, bool kFull>
TANDEM_AVX2 inline __m256 LoadKv8(const typename KV::T* p, int64_t left) {
  return kFull ? KV::Load8(p) : KV::LoadPartial8(p, left);
}

// scores[j .. j + count) = scale * q . k_j for count <= 8 keys; missing keys repeat
// key j and are not stored. kFull: head_dim is a multiple of 8.
template <bool kFull, typename KV>
TANDEM_AVX2 inline void ScoreGroup(const GroupTask<KV>& t, const float* q, int j, int count,
                                   float* scores) {
  const typename KV::T* k[8];
  if (count == 8) {
    for (int l = 0; l < 8; ++l) k[l] = t.k_base + t.offsets[j + l];
  } else {
    for (int l = 0; l < 8; ++l) k[l] = t.k_base + t.offsets[j + (l < count ? l : 0)];
  }
  __m256 acc[8];
#pragma GCC unroll 8
  for (int l = 0; l < 8; ++l) acc[l] = _mm256_setzero_ps();
  for (int d = 0; d < t.head_dim; d += 8) {
    const int64_t left = t.head_dim - d;
    const __m256 qv = Load8<kFull>(q + d, left);
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {
      acc[l] = _mm256_fmadd_ps(qv, LoadKv8<KV, kFull>(k[l] + d, left), acc[l]);
    }
  }
  // Lane l of `sums` = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) of acc[l].
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(acc[4], acc[5]), _mm256_hadd_ps(acc[6], acc[7]));
  const __m256 sums =
      _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
  const __m256 scaled = _mm256_mul_ps(sums, _mm256_set1_ps(t.scale));
  if (count == 8) {
    _mm256_storeu_ps(scores + j, scaled);
  } else {
    StorePartial(scores + j, count, scaled);
  }
}

// Turns scores[0, n) into exp(score - max) in place; returns 1 / their sum (8-lane
// partial sums over the chunks of 8, then the fixed tree).
TANDEM_AVX2 float ExpAndSum(float* scores, int n) {
  float max = -std::numeric_limits<float>::infinity();
  int j = 0;
  if (n >= 8) {
    __m256 m = _mm256_loadu_ps(scores);
    for (j = 8; j + 8 <= n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(scores + j));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m);
    for (float lane : lanes) max = std::max(max, lane);
  }
  for (; j < n; ++j) max = std::max(max, scores[j]);
  const __m256 vmax = _mm256_set1_ps(max);
  __m256 sum = _mm256_setzero_ps();
  for (j = 0; j < n; j += 8) {
    const int left = n - j;
    __m256 p = Exp8(_mm256_sub_ps(LoadPartial(scores + j, left), vmax));
    if (left < 8) p = _mm256_and_ps(p, _mm256_castsi256_ps(TailMask(left)));
    StorePartial(scores + j, left, p);
    sum = _mm256_add_ps(sum, p);
  }
  return 1.0f / Reduce1(sum);
}

// Adds p_j v_j[d0 .. d0 + 8*NV) for keys [begin, end) to the running sums even/odd
// (memory, [8*NV] each): even keys into `even`, odd keys into `odd`, each in key
// order (two chains hide the FMA latency). `begin` is even.
template <int NV, bool kFull, typename KV>
TANDEM_AVX2 inline void AccumulateValues(const GroupTask<KV>& t, const float* p, int begin, int end,
                                         int d0, float* even_sums, float* odd_sums) {
  __m256 even[NV], odd[NV];
#pragma GCC unroll 4
  for (int c = 0; c < NV; ++c) {
    even[c] = _mm256_loadu_ps(even_sums + 8 * c);
    odd[c] = _mm256_loadu_ps(odd_sums + 8 * c);
  }
  const int64_t left = t.head_dim - d0;
  int j = begin;
  for (; j + 2 <= end; j += 2) {
    const auto* v0 = t.v_base + t.offsets[j] + d0;
    const auto* v1 = t.v_base + t.offsets[j + 1] + d0;
    const __m256 p0 = _mm256_broadcast_ss(p + j);
    const __m256 p1 = _mm256_broadcast_ss(p + j + 1);
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) {
      even[c] = _mm256_fmadd_ps(p0, LoadKv8<KV, kFull>(v0 + 8 * c, left - 8 * c), even[c]);
      odd[c] = _mm256_fmadd_ps(p1, LoadKv8<KV, kFull>(v1 + 8 * c, left - 8 * c), odd[c]);
    }
  }
  if (j < end) {
    const auto* v0 = t.v_base + t.offsets[j] + d0;
    const __m256 p0 = _mm256_broadcast_ss(p + j);
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) {
      even[c] = _mm256_fmadd_ps(p0, LoadKv8<KV, kFull>(v0 + 8 * c, left - 8 * c), even[c]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < NV; ++c) {
    _mm256_storeu_ps(even_sums + 8 * c, even[c]);
    _mm256_storeu_ps(odd_sums + 8 * c, odd[c]);
  }
}

template <bool kFull, typename KV>
TANDEM_AVX2 void AttendAvx2(const GroupTask<KV>& t) {
  const int hd = t.head_dim;
  // Scores, chunk by chunk so each chunk's keys serve every head from L1.
  for (int c0 = 0; c0 < t.n; c0 += kKeyChunk) {
    const int c1 = std::min(t.n, c0 + kKeyChunk);
    for (int g = 0; g < t.heads; ++g) {
      for (int j = c0; j < c1; j += 8) {
        ScoreGroup<kFull, KV>(t, t.q + size_t(g) * hd, j, std::min(8, c1 - j),
                              t.scores + g * t.score_stride);
      }
    }
  }
  float inv_sum[64];
  float* inv = t.heads <= 64 ? inv_sum : nullptr;
  std::vector<float> inv_heap;
  if (inv == nullptr) {
    inv_heap.resize(t.heads);
    inv = inv_heap.data();
  }
  for (int g = 0; g < t.heads; ++g) inv[g] = ExpAndSum(t.scores + g * t.score_stride, t.n);
  // Value sums, chunk by chunk so each chunk's values serve every head from L1.
  std::fill(t.acc, t.acc + size_t(t.heads) * 2 * t.acc_stride, 0.0f);
  for (int c0 = 0; c0 < t.n; c0 += kKeyChunk) {
    const int c1 = std::min(t.n, c0 + kKeyChunk);
    for (int g = 0; g < t.heads; ++g) {
      const float* p = t.scores + g * t.score_stride;
      float* even = t.acc + size_t(g) * 2 * t.acc_stride;
      float* odd = even + t.acc_stride;
      for (int d0 = 0; d0 < hd; d0 += 32) {
        switch (std::min<int>(4, Chunks8(hd - d0))) {
          case 1:
            AccumulateValues<1, kFull, KV>(t, p, c0, c1, d0, even + d0, odd + d0);
            break;
          case 2:
            AccumulateValues<2, kFull, KV>(t, p, c0, c1, d0, even + d0, odd + d0);
            break;
          case 3:
            AccumulateValues<3, kFull, KV>(t, p, c0, c1, d0, even + d0, odd + d0);
            break;
          default:
            AccumulateValues<4, kFull, KV>(t, p, c0, c1, d0, even + d0, odd + d0);
            break;
        }
      }
    }
  }
  for (int g = 0; g < t.heads; ++g) {
    const float* even = t.acc + size_t(g) * 2 * t.acc_stride;
    const float* odd = even + t.acc_stride;
    const __m256 scale = _mm256_set1_ps(inv[g]);
    for (int d = 0; d < hd; d += 8) {
      const __m256 sum = _mm256_add_ps(_mm256_loadu_ps(even + d), _mm256_loadu_ps(odd + d));
      StorePartial(t.out + size_t(g) * hd + d, hd - d, _mm256_mul_ps(sum, scale));
    }
  }
}

#endif  // TANDEM_HAVE_AVX2_KERNELS

}  // namespace

AttentionRows BuildAttentionRows(const StepPlan& plan) {
  AttentionRows rows;
  const int n = plan.num_rows();
  rows.sequence.assign(n, 0);
  rows.prefix_keys.assign(n, 0);
  rows.extra_begin.assign(n + 1, 0);
  std::vector<int32_t> ancestors;
  for (size_t s = 0; s < plan.sequences.size(); ++s) {
    const StepPlan::Sequence& seq = plan.sequences[s];
    for (int i = 0; i < seq.row_count; ++i) {
      const int r = seq.row_begin + i;
      rows.sequence[r] = static_cast<int32_t>(s);
      rows.extra_begin[r] = static_cast<int32_t>(rows.extra_keys.size());
      int keys;
      if (seq.parents.empty()) {
        rows.prefix_keys[r] = seq.context_length + i + 1;
        keys = rows.prefix_keys[r];
      } else {
        rows.prefix_keys[r] = seq.context_length;
        ancestors.clear();
        for (int a = i; a >= 0; a = seq.parents[a]) ancestors.push_back(seq.context_length + a);
        rows.extra_keys.insert(rows.extra_keys.end(), ancestors.rbegin(), ancestors.rend());
        keys = seq.context_length + static_cast<int>(ancestors.size());
      }
      rows.max_keys = std::max(rows.max_keys, keys);
      rows.total_keys += keys;
    }
  }
  rows.extra_begin[n] = static_cast<int32_t>(rows.extra_keys.size());
  return rows;
}

template <typename KV>
void PagedAttentionOf(SimdLevel level, ThreadPool* pool, const StepPlan& plan,
                      const AttentionRows& rows, const float* q, const KvLayout& layout,
                      const typename KV::T* k_cache, const typename KV::T* v_cache, int num_heads,
                      float scale, float* out) {
  const int num_rows = plan.num_rows();
  if (num_rows == 0 || num_heads == 0) return;
  CHECK_GT(layout.num_kv_heads, 0);
  CHECK_EQ(num_heads % layout.num_kv_heads, 0)
      << "num_heads " << num_heads << " is not a multiple of num_kv_heads " << layout.num_kv_heads;
  CHECK_EQ(layout.block_size, plan.block_size) << "KvLayout and StepPlan block sizes differ";
  const int head_dim = layout.head_dim;
  const int group = num_heads / layout.num_kv_heads;
  const int64_t kv_stride = int64_t(layout.num_kv_heads) * head_dim;
  const int bs = plan.block_size;

  // One task per (row, KV head): the query heads of a group share their keys.
  auto range = [&](int64_t task_begin, int64_t task_end) {
    const int64_t score_stride = (int64_t(rows.max_keys) + 7) / 8 * 8 + 8;
    const int64_t acc_stride = (head_dim + 7) / 8 * 8;
    std::vector<float> scores(size_t(group) * score_stride);
    std::vector<float> acc(size_t(group) * 2 * acc_stride);
    std::vector<int64_t> offsets(size_t(rows.max_keys) + 8);
    int offsets_row = -1;
    int n = 0;
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int r = static_cast<int>(task / layout.num_kv_heads);
      const int kv_head = static_cast<int>(task % layout.num_kv_heads);
      if (r != offsets_row) {  // Slot offsets of this row's keys, in logical order.
        const std::vector<int32_t>& table = plan.sequences[rows.sequence[r]].block_table;
        auto slot = [&](int32_t logical) {
          const int32_t block = table[logical / bs];
          CHECK(block >= 0 && block < layout.num_blocks)
              << "block id " << block << " outside the KV cache of " << layout.num_blocks
              << " blocks";
          return (int64_t(block) * bs + logical % bs) * kv_stride;
        };
        n = 0;
        for (int32_t key = 0; key < rows.prefix_keys[r]; ++key) offsets[n++] = slot(key);
        for (int32_t e = rows.extra_begin[r]; e < rows.extra_begin[r + 1]; ++e) {
          offsets[n++] = slot(rows.extra_keys[e]);
        }
        offsets_row = r;
      }
      const size_t first_head = size_t(r) * num_heads + size_t(kv_head) * group;
      GroupTask<KV> t;
      t.q = q + first_head * head_dim;
      t.k_base = k_cache + size_t(kv_head) * head_dim;
      t.v_base = v_cache + size_t(kv_head) * head_dim;
      t.offsets = offsets.data();
      t.n = n;
      t.heads = group;
      t.head_dim = head_dim;
      t.scale = scale;
      t.scores = scores.data();
      t.score_stride = score_stride;
      t.acc = acc.data();
      t.acc_stride = acc_stride;
      t.out = out + first_head * head_dim;
#if defined(TANDEM_HAVE_AVX2_KERNELS)
      if (UsesAvx2(level)) {
        if (head_dim % 8 == 0) {
          AttendAvx2<true, KV>(t);
        } else {
          AttendAvx2<false, KV>(t);
        }
        continue;
      }
#endif
      AttendPortable<KV>(t);
    }
  };
  const int64_t tasks = int64_t(num_rows) * layout.num_kv_heads;
  const int64_t fma_total = std::max<int64_t>(1, rows.total_keys * num_heads * head_dim * 2);
  const int64_t min_tasks = std::max<int64_t>(1, tasks * kMinFmaPerThread / fma_total);
  if (pool == nullptr) {
    range(0, tasks);
  } else {
    pool->ParallelFor(tasks, range, min_tasks);
  }
}

void PagedAttention(SimdLevel level, ThreadPool* pool, const StepPlan& plan,
                    const AttentionRows& rows, const float* q, const KvLayout& layout,
                    const void* k_cache, const void* v_cache, int num_heads, float scale,
                    float* out) {
  switch (layout.dtype) {
    case DType::kF32:
      return PagedAttentionOf<F32Kv>(level, pool, plan, rows, q, layout,
                                     static_cast<const float*>(k_cache),
                                     static_cast<const float*>(v_cache), num_heads, scale, out);
    case DType::kF16:
      return PagedAttentionOf<F16Kv>(level, pool, plan, rows, q, layout,
                                     static_cast<const uint16_t*>(k_cache),
                                     static_cast<const uint16_t*>(v_cache), num_heads, scale, out);
    case DType::kBF16:
      return PagedAttentionOf<Bf16Kv>(level, pool, plan, rows, q, layout,
                                      static_cast<const uint16_t*>(k_cache),
                                      static_cast<const uint16_t*>(v_cache), num_heads, scale, out);
    case DType::kQ8_0:
    case DType::kQ4_0:
      break;
  }
  LOG(FATAL) << "PagedAttention: KV dtype " << DTypeName(layout.dtype) << " is not supported";
}

}  // namespace cpu
}  // namespace tandem
