// CUDA MatMul (both GEMM modes) against the double-precision reference, the CPU
// backend, and (batch-invariant mode) against itself across row counts.
//
// Tolerances, relative to s = sum_k |x[r, k] * w[o, k]| of each output:
//  * vs the reference on bf16-rounded weights (the exact math the GPU is asked to do):
//    batch_invariant 1e-5 * s (float32 accumulation of float32 x bf16 products);
//    cublas 1e-4 * s against the reference on bf16-rounded weights AND activations
//    (tensor-core accumulation need not round like IEEE float32 adds).
//  * vs the CPU backend on the original float32 weights: 1e-2 * s (bf16 weights).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_test_util.h"

namespace tandem {
namespace {

using Gemm = CudaBackendOptions::Gemm;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> RoundedToBf16(std::vector<float> v) {
  for (float& x : v) x = cpu::Bf16ToFloat(cpu::FloatToBf16(x));
  return v;
}

// s[r, o] = sum_k |x[r, k] w[o, k]|.
std::vector<double> AbsSums(const std::vector<float>& x, int rows, const std::vector<float>& w,
                            int out, int in) {
  std::vector<double> s(size_t(rows) * out);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double sum = 0;
      for (int k = 0; k < in; ++k)
        sum += std::fabs(double(x[size_t(r) * in + k]) * w[size_t(o) * in + k]);
      s[size_t(r) * out + o] = sum;
    }
  }
  return s;
}

::testing::AssertionResult Close(const std::vector<float>& got, const std::vector<float>& want,
                                 const std::vector<double>& scale, double rel) {
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(double(got[i]) - want[i]);
    if (!(diff <= rel * scale[i] + 1e-30)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " vs " << want[i] << " (diff " << diff
             << ", allowed " << rel * scale[i] << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

class CudaGemmTest : public cuda::testing::CudaTest, public ::testing::WithParamInterface<Gemm> {
 protected:
  CudaBackendOptions Options() const override {
    CudaBackendOptions options;
    options.gemm = GetParam();
    return options;
  }
};

TEST_P(CudaGemmTest, MatchesReferenceAndCpu) {
  struct Shape {
    int rows, out, in;
  };
  CpuBackend cpu(1);
  uint32_t seed = 1;
  for (const Shape& s :
       {Shape{1, 64, 256}, Shape{2, 50, 72}, Shape{3, 33, 20}, Shape{4, 9, 1}, Shape{5, 70, 136},
        Shape{8, 16, 512}, Shape{17, 40, 128}, Shape{33, 130, 264}}) {
    SCOPED_TRACE(::testing::Message() << "rows " << s.rows << " out " << s.out << " in " << s.in);
    const std::vector<float> x = Random(size_t(s.rows) * s.in, seed++);
    const std::vector<float> w = Random(size_t(s.out) * s.in, seed++);
    const Weight weight = UploadF32(w, s.out, s.in);
    const std::vector<float> got = MatMulOnDevice(x, s.rows, weight);

    const std::vector<float> w16 = RoundedToBf16(w);
    const std::vector<float> x_ref = GetParam() == Gemm::kCublas ? RoundedToBf16(x) : x;
    std::vector<float> want(got.size());
    reference::MatMul(x_ref.data(), s.rows, w16.data(), s.out, s.in, want.data());
    const std::vector<double> scale = AbsSums(x, s.rows, w, s.out, s.in);
    EXPECT_TRUE(Close(got, want, scale, GetParam() == Gemm::kCublas ? 1e-4 : 1e-5));

    auto cpu_w = cpu.UploadWeight(w.data(), DType::kF32, s.out, s.in, nullptr);
    ASSERT_TRUE(cpu_w.ok());
    std::vector<float> cpu_out(got.size());
    cpu.MatMul(x.data(), s.rows, *cpu_w, cpu_out.data());
    EXPECT_TRUE(Close(got, cpu_out, scale, 1e-2));
  }
}

TEST_P(CudaGemmTest, RowsDoNotDependOnTheBatch) {
  if (GetParam() != Gemm::kBatchInvariant) GTEST_SKIP() << "cuBLAS is not batch invariant";
  const int in = 264, out = 72, max_rows = 20;
  const std::vector<float> x = Random(size_t(max_rows) * in, 7);
  const Weight weight = UploadF32(Random(size_t(out) * in, 8), out, in);
  const std::vector<float> full = MatMulOnDevice(x, max_rows, weight);
  for (int rows = 1; rows <= max_rows; ++rows) {
    // The first `rows` rows, and each row alone, give the same bits as the full batch.
    const std::vector<float> part =
        MatMulOnDevice(std::vector<float>(x.begin(), x.begin() + rows * in), rows, weight);
    ASSERT_EQ(std::memcmp(part.data(), full.data(), part.size() * sizeof(float)), 0) << rows;
    const int r = rows - 1;
    const std::vector<float> alone =
        MatMulOnDevice(std::vector<float>(x.begin() + r * in, x.begin() + (r + 1) * in), 1, weight);
    ASSERT_EQ(std::memcmp(alone.data(), full.data() + size_t(r) * out, out * sizeof(float)), 0)
        << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaGemmTest,
                         ::testing::Values(Gemm::kBatchInvariant, Gemm::kCublas),
                         [](const ::testing::TestParamInfo<Gemm>& info) {
                           return std::string(GemmModeName(info.param));
                         });

}  // namespace
}  // namespace tandem
