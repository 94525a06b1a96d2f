#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "glog/logging.h"
#include "kernels/cpu/vec_math.h"

namespace tandem {
namespace cpu {
namespace {

// Smallest share of multiply-adds worth handing to another thread.
constexpr int64_t kMinFmaPerThread = 1 << 15;

// The inputs of one (row, head) task.
struct HeadTask {
  const float* q;          // [head_dim]
  const float* k_base;     // k_cache + kv_head * head_dim
  const float* v_base;     // v_cache + kv_head * head_dim
  const int64_t* offsets;  // [n] element offset of each key's slot
  int n;
  int head_dim;
  float scale;
  float* scores;  // scratch [n rounded up to 8]
  float* out;     // [head_dim]
};

void AttendPortable(const HeadTask& t) {
  const int hd = t.head_dim;
  float max = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < t.n; ++j) {
    const float* k = t.k_base + t.offsets[j];
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int d = 0;
    for (; d + 8 <= hd; d += 8) {
      for (int l = 0; l < 8; ++l) acc[l] += t.q[d + l] * k[d + l];
    }
    for (int l = 0; d + l < hd; ++l) acc[l] += t.q[d + l] * k[d + l];
    t.scores[j] = ReduceTree8(acc) * t.scale;
    max = std::max(max, t.scores[j]);
  }
  float sum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int j = 0; j < t.n; ++j) {
    t.scores[j] = std::exp(t.scores[j] - max);
    sum[j % 8] += t.scores[j];
  }
  const float inv_sum = 1.0f / ReduceTree8(sum);
  for (int d = 0; d < hd; ++d) t.out[d] = 0.0f;
  for (int j = 0; j < t.n; ++j) {
    const float* v = t.v_base + t.offsets[j];
    const float p = t.scores[j];
    for (int d = 0; d < hd; ++d) t.out[d] += p * v[d];
  }
  for (int d = 0; d < hd; ++d) t.out[d] *= inv_sum;
}

#if defined(TANDEM_HAVE_AVX2_KERNELS)

// scores[j..j+8) for up to 8 keys; missing keys repeat key j and are not stored.
TANDEM_AVX2 inline void ScoreGroup(const HeadTask& t, int j) {
  const int count = std::min(8, t.n - j);
  const float* k[8];
  for (int l = 0; l < 8; ++l) k[l] = t.k_base + t.offsets[j + (l < count ? l : 0)];
  __m256 acc[8];
#pragma GCC unroll 8
  for (int l = 0; l < 8; ++l) acc[l] = _mm256_setzero_ps();
  for (int d = 0; d < t.head_dim; d += 8) {
    const int64_t left = t.head_dim - d;
    const __m256 qv = LoadPartial(t.q + d, left);
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) acc[l] = _mm256_fmadd_ps(qv, LoadPartial(k[l] + d, left), acc[l]);
  }
  const __m256 scores = _mm256_set_m128(Reduce4(acc[4], acc[5], acc[6], acc[7]),
                                        Reduce4(acc[0], acc[1], acc[2], acc[3]));
  StorePartial(t.scores + j, count, _mm256_mul_ps(scores, _mm256_set1_ps(t.scale)));
}

// out[d0 .. d0 + 8*NV) = sum_j p_j v_j: even and odd keys accumulate separately (each
// in key order; two chains hide the FMA latency), then even + odd. The order depends
// only on the row's key count.
template <int NV>
TANDEM_AVX2 inline void AccumulateValues(const HeadTask& t, int d0, __m256 inv_sum) {
  __m256 even[NV], odd[NV];
#pragma GCC unroll 4
  for (int c = 0; c < NV; ++c) even[c] = odd[c] = _mm256_setzero_ps();
  const int64_t left = t.head_dim - d0;
  int j = 0;
  for (; j + 2 <= t.n; j += 2) {
    const float* v0 = t.v_base + t.offsets[j] + d0;
    const float* v1 = t.v_base + t.offsets[j + 1] + d0;
    const __m256 p0 = _mm256_broadcast_ss(t.scores + j);
    const __m256 p1 = _mm256_broadcast_ss(t.scores + j + 1);
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) {
      even[c] = _mm256_fmadd_ps(p0, LoadPartial(v0 + 8 * c, left - 8 * c), even[c]);
      odd[c] = _mm256_fmadd_ps(p1, LoadPartial(v1 + 8 * c, left - 8 * c), odd[c]);
    }
  }
  if (j < t.n) {
    const float* v0 = t.v_base + t.offsets[j] + d0;
    const __m256 p0 = _mm256_broadcast_ss(t.scores + j);
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) {
      even[c] = _mm256_fmadd_ps(p0, LoadPartial(v0 + 8 * c, left - 8 * c), even[c]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < NV; ++c) {
    StorePartial(t.out + d0 + 8 * c, left - 8 * c,
                 _mm256_mul_ps(_mm256_add_ps(even[c], odd[c]), inv_sum));
  }
}

TANDEM_AVX2 void AttendAvx2(const HeadTask& t) {
  for (int j = 0; j < t.n; j += 8) ScoreGroup(t, j);
  // Max (exact in any order).
  float max = -std::numeric_limits<float>::infinity();
  int j = 0;
  if (t.n >= 8) {
    __m256 m = _mm256_loadu_ps(t.scores);
    for (j = 8; j + 8 <= t.n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(t.scores + j));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m);
    for (float lane : lanes) max = std::max(max, lane);
  }
  for (; j < t.n; ++j) max = std::max(max, t.scores[j]);
  // Probabilities (unnormalised) and their sum.
  const __m256 vmax = _mm256_set1_ps(max);
  __m256 sum = _mm256_setzero_ps();
  for (j = 0; j < t.n; j += 8) {
    const int left = t.n - j;
    __m256 p = Exp8(_mm256_sub_ps(LoadPartial(t.scores + j, left), vmax));
    if (left < 8) p = _mm256_and_ps(p, _mm256_castsi256_ps(TailMask(left)));
    StorePartial(t.scores + j, left, p);
    sum = _mm256_add_ps(sum, p);
  }
  const __m256 inv_sum = _mm256_set1_ps(1.0f / Reduce1(sum));
  for (int d0 = 0; d0 < t.head_dim; d0 += 32) {
    switch (std::min<int>(4, Chunks8(t.head_dim - d0))) {
      case 1:
        AccumulateValues<1>(t, d0, inv_sum);
        break;
      case 2:
        AccumulateValues<2>(t, d0, inv_sum);
        break;
      case 3:
        AccumulateValues<3>(t, d0, inv_sum);
        break;
      default:
        AccumulateValues<4>(t, d0, inv_sum);
        break;
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

void PagedAttention(SimdLevel level, ThreadPool* pool, const StepPlan& plan,
                    const AttentionRows& rows, const float* q, const KvLayout& layout,
                    const float* k_cache, const float* v_cache, int num_heads, float scale,
                    float* out) {
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

  auto range = [&](int64_t task_begin, int64_t task_end) {
    std::vector<float> scores(size_t(rows.max_keys) + 8);
    std::vector<int64_t> offsets(size_t(rows.max_keys) + 8);
    int offsets_row = -1;
    int n = 0;
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int r = static_cast<int>(task / num_heads);
      const int h = static_cast<int>(task % num_heads);
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
      const int kv_head = h / group;
      HeadTask t;
      t.q = q + (size_t(r) * num_heads + h) * head_dim;
      t.k_base = k_cache + size_t(kv_head) * head_dim;
      t.v_base = v_cache + size_t(kv_head) * head_dim;
      t.offsets = offsets.data();
      t.n = n;
      t.head_dim = head_dim;
      t.scale = scale;
      t.scores = scores.data();
      t.out = out + (size_t(r) * num_heads + h) * head_dim;
#if defined(TANDEM_HAVE_AVX2_KERNELS)
      if (level == SimdLevel::kAvx2) {
        AttendAvx2(t);
        continue;
      }
#endif
      AttendPortable(t);
    }
  };
  const int64_t tasks = int64_t(num_rows) * num_heads;
  const int64_t fma_total = std::max<int64_t>(1, rows.total_keys * num_heads * head_dim * 2);
  const int64_t min_tasks = std::max<int64_t>(1, tasks * kMinFmaPerThread / fma_total);
  if (pool == nullptr) {
    range(0, tasks);
  } else {
    pool->ParallelFor(tasks, range, min_tasks);
  }
}

}  // namespace cpu
}  // namespace tandem
