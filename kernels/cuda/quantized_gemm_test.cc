// CUDA MatMul with q8_0 / q4_0 weights against the CPU backend, bitwise (both compute
// the integer block dot products in the order of kernels/cpu/quantized_matmul.h; a NaN
// output only has to be a NaN on both), and against itself across row counts. The CPU
// kernels are tested against a naive dequantize-then-f32 reference in
// kernels/cpu/quantized_matmul_test.cc. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/half.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_test_util.h"

namespace tandem {
namespace {

using Gemm = CudaBackendOptions::Gemm;

struct Format {
  DType dtype;
  Gemm gemm;
};

// A block-quantized weight in host memory (layout in kernels/backend.h).
struct HostQuantized {
  std::vector<uint8_t> data;  // int8 quants (q8_0) or packed nibbles (q4_0)
  std::vector<uint16_t> scales;
};

HostQuantized RandomWeight(DType dtype, int out, int in, uint32_t seed) {
  std::mt19937 rng(seed);
  HostQuantized w;
  const int64_t blocks = Q8BlocksPerRow(in), row_bytes = StoredRowBytes(dtype, in);
  w.data.resize(size_t(out) * row_bytes);
  if (dtype == DType::kQ8_0) {
    std::uniform_int_distribution<int> q(-127, 127);
    for (uint8_t& b : w.data) b = static_cast<uint8_t>(static_cast<int8_t>(q(rng)));
  } else {
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t& b : w.data) b = static_cast<uint8_t>(byte(rng));
    const int last = in - 32 * static_cast<int>(blocks - 1);
    if (last % 2 == 1) {  // The unused high nibble of a short odd block is 0.
      for (int o = 0; o < out; ++o) w.data[size_t(o) * row_bytes + row_bytes - 1] &= 0x0f;
    }
  }
  std::uniform_real_distribution<float> d(-0.05f, 0.05f);
  w.scales.resize(size_t(out) * blocks);
  for (uint16_t& s : w.scales) s = cpu::FloatToF16(d(rng));
  return w;
}

// Activations with the special blocks of the quantizer: an all-zero block, one too small
// to scale (1 / d overflows), and blocks with a NaN and an infinity in some rows.
std::vector<float> Activations(int rows, int in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> x(size_t(rows) * in);
  for (float& v : x) v = dist(rng);
  for (int r = 0; r < rows; ++r) {
    float* row = x.data() + size_t(r) * in;
    if (r % 3 == 1) std::fill(row, row + std::min(in, 32), 0.0f);
    if (r % 3 == 2 && in > 32) std::fill(row + 32, row + std::min(in, 64), 1e-38f);
    if (r % 5 == 3) row[in / 2] = std::numeric_limits<float>::quiet_NaN();
    if (r % 7 == 4) row[in - 1] = -std::numeric_limits<float>::infinity();
  }
  return x;
}

::testing::AssertionResult SameBits(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

class CudaQuantizedGemmTest : public cuda::testing::CudaTest,
                              public ::testing::WithParamInterface<Format> {
 protected:
  CudaBackendOptions Options() const override {
    CudaBackendOptions options;
    options.gemm = GetParam().gemm;
    return options;
  }

  static absl::StatusOr<Weight> Upload(Backend& backend, const HostQuantized& w, int out, int in) {
    return GetParam().dtype == DType::kQ8_0
               ? backend.UploadQ8Weight(w.data.data(), w.scales.data(), out, in, nullptr)
               : backend.UploadQ4Weight(w.data.data(), w.scales.data(), out, in, nullptr);
  }
};

TEST_P(CudaQuantizedGemmTest, BitwiseTheCpuBackend) {
  struct Shape {
    int rows, out, in;
  };
  CpuBackend cpu(1);
  uint32_t seed = 1;
  for (const Shape& s :
       {Shape{1, 64, 256}, Shape{2, 50, 72}, Shape{3, 33, 20}, Shape{4, 9, 1}, Shape{5, 70, 136},
        Shape{8, 16, 512}, Shape{17, 40, 100}, Shape{33, 130, 264}, Shape{6, 300, 2048}}) {
    SCOPED_TRACE(::testing::Message() << "rows " << s.rows << " out " << s.out << " in " << s.in);
    const HostQuantized host = RandomWeight(GetParam().dtype, s.out, s.in, seed++);
    const std::vector<float> x = Activations(s.rows, s.in, seed++);
    auto weight = Upload(*backend_, host, s.out, s.in);
    ASSERT_TRUE(weight.ok()) << weight.status();
    const std::vector<float> got = MatMulOnDevice(x, s.rows, *weight);
    ASSERT_TRUE(backend_->Synchronize().ok());

    auto cpu_weight = Upload(cpu, host, s.out, s.in);
    ASSERT_TRUE(cpu_weight.ok()) << cpu_weight.status();
    std::vector<float> want(got.size());
    cpu.MatMul(x.data(), s.rows, *cpu_weight, want.data());
    EXPECT_TRUE(SameBits(got, want));
  }
}

TEST_P(CudaQuantizedGemmTest, RowsDoNotDependOnTheBatch) {
  const int in = 264, out = 72, max_rows = 20;
  const std::vector<float> x = Activations(max_rows, in, 7);
  auto weight = Upload(*backend_, RandomWeight(GetParam().dtype, out, in, 8), out, in);
  ASSERT_TRUE(weight.ok()) << weight.status();
  const std::vector<float> full = MatMulOnDevice(x, max_rows, *weight);
  for (int rows = 1; rows <= max_rows; ++rows) {
    const int r = rows - 1;
    const std::vector<float> alone = MatMulOnDevice(
        std::vector<float>(x.begin() + r * in, x.begin() + (r + 1) * in), 1, *weight);
    ASSERT_TRUE(SameBits(alone, std::vector<float>(full.begin() + size_t(r) * out,
                                                   full.begin() + size_t(rows) * out)))
        << r;
    const std::vector<float> part =
        MatMulOnDevice(std::vector<float>(x.begin(), x.begin() + rows * in), rows, *weight);
    ASSERT_TRUE(SameBits(part, std::vector<float>(full.begin(), full.begin() + part.size())))
        << rows;
  }
}

TEST_P(CudaQuantizedGemmTest, BadUploadsAreInvalidArgument) {
  const HostQuantized host = RandomWeight(GetParam().dtype, 4, 64, 3);
  EXPECT_EQ(Upload(*backend_, host, -1, 64).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->UploadQ8Weight(nullptr, host.scales.data(), 4, 64, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      backend_->UploadWeight(host.data.data(), GetParam().dtype, 4, 64, nullptr).status().code(),
      absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaQuantizedGemmTest,
                         ::testing::Values(Format{DType::kQ8_0, Gemm::kBatchInvariant},
                                           Format{DType::kQ4_0, Gemm::kBatchInvariant},
                                           Format{DType::kQ8_0, Gemm::kCublas}),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return std::string(DTypeName(info.param.dtype)) + "_" +
                                  GemmModeName(info.param.gemm);
                         });

}  // namespace
}  // namespace tandem
