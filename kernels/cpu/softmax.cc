#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/cpu/vec_math.h"

namespace tandem {
namespace cpu {
namespace {

constexpr int64_t kMinElementsPerThread = 1 << 14;

void SoftmaxRowPortable(const float* x, int n, float* out) {
  float max = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < n; ++i) {
    out[i] = std::exp(x[i] - max);
    acc[i % 8] += out[i];
  }
  const float inv_sum = 1.0f / ReduceTree8(acc);
  for (int i = 0; i < n; ++i) out[i] *= inv_sum;
}

#if defined(TANDEM_HAVE_AVX2_KERNELS)
TANDEM_AVX2 void SoftmaxRowAvx2(const float* x, int n, float* out) {
  float max = -std::numeric_limits<float>::infinity();
  int i = 0;
  if (n >= 8) {
    __m256 m = _mm256_loadu_ps(x);
    for (i = 8; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m);
    for (float lane : lanes) max = std::max(max, lane);
  }
  for (; i < n; ++i) max = std::max(max, x[i]);
  const __m256 vmax = _mm256_set1_ps(max);
  __m256 acc = _mm256_setzero_ps();
  for (i = 0; i < n; i += 8) {
    __m256 p = Exp8(_mm256_sub_ps(LoadPartial(x + i, n - i), vmax));
    if (n - i < 8) p = _mm256_and_ps(p, _mm256_castsi256_ps(TailMask(n - i)));
    StorePartial(out + i, n - i, p);
    acc = _mm256_add_ps(acc, p);
  }
  const __m256 inv_sum = _mm256_set1_ps(1.0f / Reduce1(acc));
  for (i = 0; i < n; i += 8) {
    StorePartial(out + i, n - i, _mm256_mul_ps(LoadPartial(out + i, n - i), inv_sum));
  }
}
#endif

}  // namespace

void SoftmaxRow(SimdLevel level, const float* x, int n, float* out) {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (UsesAvx2(level)) return SoftmaxRowAvx2(x, n, out);
#endif
  SoftmaxRowPortable(x, n, out);
}

void Softmax(SimdLevel level, ThreadPool* pool, const float* x, int rows, int cols, float* out) {
  if (rows <= 0 || cols <= 0) return;
  auto range = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      SoftmaxRow(level, x + size_t(r) * cols, cols, out + size_t(r) * cols);
    }
  };
  const int64_t min_rows = std::max<int64_t>(1, kMinElementsPerThread / cols);
  if (pool == nullptr) {
    range(0, rows);
  } else {
    pool->ParallelFor(rows, range, min_rows);
  }
}

}  // namespace cpu
}  // namespace tandem
