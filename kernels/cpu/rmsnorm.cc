#include "kernels/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/vec_math.h"

namespace tandem {
namespace cpu {
namespace {

constexpr int64_t kMinElementsPerThread = 1 << 14;

void RmsNormRowPortable(const float* x, const float* weight, int dim, float eps, float* out) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= dim; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += x[i + j] * x[i + j];
  }
  for (int j = 0; i + j < dim; ++j) acc[j] += x[i + j] * x[i + j];
  const float inv_rms = 1.0f / std::sqrt(ReduceTree8(acc) / float(dim) + eps);
  for (int k = 0; k < dim; ++k) out[k] = weight[k] * (x[k] * inv_rms);
}

#if defined(TANDEM_HAVE_AVX2_KERNELS)
TANDEM_AVX2 void RmsNormRowAvx2(const float* x, const float* weight, int dim, float eps,
                                float* out) {
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < dim; i += 8) {
    const __m256 v = LoadPartial(x + i, dim - i);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  const float inv_rms = 1.0f / std::sqrt(Reduce1(acc) / float(dim) + eps);
  const __m256 scale = _mm256_set1_ps(inv_rms);
  for (int i = 0; i < dim; i += 8) {
    const __m256 v = _mm256_mul_ps(LoadPartial(x + i, dim - i), scale);
    StorePartial(out + i, dim - i, _mm256_mul_ps(LoadPartial(weight + i, dim - i), v));
  }
}
#endif

}  // namespace

void RmsNorm(SimdLevel level, ThreadPool* pool, const float* x, const float* weight, int rows,
             int dim, float eps, float* out) {
  if (rows <= 0 || dim <= 0) return;
  auto range = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + size_t(r) * dim;
      float* outr = out + size_t(r) * dim;
#if defined(TANDEM_HAVE_AVX2_KERNELS)
      if (UsesAvx2(level)) {
        RmsNormRowAvx2(xr, weight, dim, eps, outr);
        continue;
      }
#endif
      RmsNormRowPortable(xr, weight, dim, eps, outr);
    }
  };
  const int64_t min_rows = std::max<int64_t>(1, kMinElementsPerThread / dim);
  if (pool == nullptr) {
    range(0, rows);
  } else {
    pool->ParallelFor(rows, range, min_rows);
  }
}

}  // namespace cpu
}  // namespace tandem
