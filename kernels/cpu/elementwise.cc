#include "kernels/cpu/elementwise.h"

#include <cmath>
#include <cstdint>

#include "kernels/cpu/vec_math.h"

namespace tandem {
namespace cpu {
namespace {

constexpr int64_t kMinElementsPerThread = 1 << 15;

void SiluMulPortable(const float* gate, const float* up, size_t begin, size_t end, float* out) {
  for (size_t i = begin; i < end; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

#if defined(TANDEM_HAVE_AVX2_KERNELS)
TANDEM_AVX2 void SiluMulAvx2(const float* gate, const float* up, size_t begin, size_t end,
                             float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (size_t i = begin; i < end; i += 8) {
    const int64_t left = int64_t(end - i);
    const __m256 g = LoadPartial(gate + i, left);
    const __m256 e = Exp8(_mm256_xor_ps(g, sign));
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, e));
    StorePartial(out + i, left, _mm256_mul_ps(s, LoadPartial(up + i, left)));
  }
}
#endif

template <typename Fn>
void Split(ThreadPool* pool, size_t n, const Fn& fn) {
  if (pool == nullptr) {
    fn(0, int64_t(n));
  } else {
    pool->ParallelFor(int64_t(n), fn, kMinElementsPerThread);
  }
}

}  // namespace

void SiluMul(SimdLevel level, ThreadPool* pool, const float* gate, const float* up, size_t n,
             float* out) {
  Split(pool, n, [&](int64_t begin, int64_t end) {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
    if (UsesAvx2(level)) return SiluMulAvx2(gate, up, begin, end, out);
#endif
    SiluMulPortable(gate, up, begin, end, out);
  });
}

void Add(ThreadPool* pool, float* x, const float* y, size_t n) {
  Split(pool, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] += y[i];
  });
}

}  // namespace cpu
}  // namespace tandem
