// CudaBackend memory, copies, weight upload and error handling. The device tests skip
// without a CUDA device; the creation and option tests run everywhere.
#include "kernels/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/device.h"

namespace tandem {
namespace {

using cuda::testing::CudaTest;

TEST(CudaBackendCreateTest, FailsWithAReasonWhenThereIsNoSuchDevice) {
  std::string why;
  const int devices = cuda::DeviceCount(&why);
  CudaBackendOptions options;
  options.device = devices == 0 ? 0 : devices + 5;
  auto backend = CudaBackend::Create(options);
  ASSERT_FALSE(backend.ok());
  EXPECT_TRUE(backend.status().code() == absl::StatusCode::kUnavailable ||
              backend.status().code() == absl::StatusCode::kUnimplemented)
      << backend.status();
  EXPECT_FALSE(backend.status().message().empty());
  auto base = MakeCudaBackend(options);
  EXPECT_EQ(base.status().code(), backend.status().code());
  std::printf("without a usable device: %s\n", backend.status().ToString().c_str());
}

TEST(CudaBackendCreateTest, GemmModeNames) {
  for (auto mode : {CudaBackendOptions::Gemm::kBatchInvariant, CudaBackendOptions::Gemm::kCublas}) {
    auto parsed = ParseGemmMode(GemmModeName(mode));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, mode);
  }
  EXPECT_EQ(ParseGemmMode("fast").status().code(), absl::StatusCode::kInvalidArgument);
}

using CudaBackendTest = CudaTest;

TEST_F(CudaBackendTest, AllocationsAreZeroedAndCopiesRoundTrip) {
  Buffer buffer = Zeros(1000);
  EXPECT_EQ(ToHost(buffer, 1000), std::vector<float>(1000, 0.0f));
  std::vector<float> values(1000);
  std::iota(values.begin(), values.end(), -3.5f);
  ASSERT_TRUE(backend_->CopyToDevice(values.data(), buffer.data(), 4000).ok());
  EXPECT_EQ(ToHost(buffer, 1000), values);
  EXPECT_EQ(backend_->name(), "cuda");
}

TEST_F(CudaBackendTest, CopyOnDeviceHandlesOverlap) {
  std::vector<float> values(100);
  std::iota(values.begin(), values.end(), 0.0f);
  Buffer buffer = ToDevice(values);
  // Forward overlap (like memmove): [0, 50) -> [10, 60).
  ASSERT_TRUE(backend_->CopyOnDevice(buffer.f32(), buffer.f32() + 10, 50 * sizeof(float)).ok());
  std::vector<float> expected = values;
  std::copy(values.begin(), values.begin() + 50, expected.begin() + 10);
  EXPECT_EQ(ToHost(buffer, 100), expected);
  // Disjoint copy.
  Buffer other = Zeros(100);
  ASSERT_TRUE(backend_->CopyOnDevice(buffer.f32(), other.f32(), 100 * sizeof(float)).ok());
  EXPECT_EQ(ToHost(other, 100), expected);
}

TEST_F(CudaBackendTest, UploadConvertsEveryDtypeToBf16) {
  const std::vector<float> f32 = {0.0f,     -0.0f,  1.0f,     -2.5f,
                                  3.14159f, 1e-20f, 65504.0f, 1.00390625f};
  std::vector<uint16_t> expected(f32.size()), f16(f32.size()), bf16(f32.size());
  for (size_t i = 0; i < f32.size(); ++i) {
    expected[i] = cpu::FloatToBf16(f32[i]);
    f16[i] = cpu::FloatToF16(f32[i]);
    bf16[i] = expected[i];
  }
  struct Case {
    const void* data;
    DType dtype;
    std::vector<uint16_t> expected;
  };
  std::vector<uint16_t> from_f16(f32.size());
  for (size_t i = 0; i < f16.size(); ++i) from_f16[i] = cpu::FloatToBf16(cpu::F16ToFloat(f16[i]));
  for (const Case& c :
       {Case{f32.data(), DType::kF32, expected}, Case{f16.data(), DType::kF16, from_f16},
        Case{bf16.data(), DType::kBF16, expected}}) {
    auto w = backend_->UploadWeight(c.data, c.dtype, 2, 4, nullptr);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->dtype, DType::kBF16);
    EXPECT_EQ(w->rows, 2);
    EXPECT_EQ(w->cols, 4);
    std::vector<uint16_t> got(8);
    ASSERT_TRUE(backend_->CopyToHost(w->data, got.data(), 16).ok());
    EXPECT_EQ(got, c.expected) << "dtype " << int(c.dtype);
  }
}

TEST_F(CudaBackendTest, BadArgumentsAreErrorsNotCrashes) {
  EXPECT_EQ(backend_->UploadWeight(nullptr, DType::kF32, -1, 4, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->UploadWeight(nullptr, DType::kF32, 2, 4, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->CopyToHost(nullptr, nullptr, 4).code(), absl::StatusCode::kInvalidArgument);
  StepPlan plan;
  plan.tokens = {1};  // No positions, slots or sequences.
  EXPECT_EQ(backend_->Prepare(plan).status().code(), absl::StatusCode::kInvalidArgument);
  // More memory than any device has: RESOURCE_EXHAUSTED, and the backend still works.
  auto huge = backend_->Allocate(size_t(1) << 52);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  Buffer small = Zeros(4);
  EXPECT_TRUE(backend_->Synchronize().ok());
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_TRUE(backend_->MemoryInfo(&free_bytes, &total_bytes).ok());
  EXPECT_GT(total_bytes, 0u);
  EXPECT_LE(free_bytes, total_bytes);
}

TEST_F(CudaBackendTest, PreparedStepsCanCoexist) {
  // Two prepared steps alive at once keep their own device arrays.
  StepPlan a, b;
  for (StepPlan* plan : {&a, &b}) {
    plan->block_size = 4;
    StepPlan::Sequence seq;
    seq.row_count = 1;
    seq.context_length = plan == &a ? 2 : 5;
    seq.block_table = {3, 1};
    plan->sequences = {seq};
    plan->tokens = {plan == &a ? 11 : 22};
    plan->positions = {seq.context_length};
    plan->kv_slots = {seq.context_length < 4 ? 3 * 4 + seq.context_length : 1 * 4 + 1};
  }
  auto step_a = backend_->Prepare(a);
  auto step_b = backend_->Prepare(b);
  ASSERT_TRUE(step_a.ok()) << step_a.status();
  ASSERT_TRUE(step_b.ok()) << step_b.status();
  // Embedding through each step picks its own token.
  std::vector<float> table(30 * 8);
  for (size_t i = 0; i < table.size(); ++i) table[i] = float(i / 8);  // Row id, exact in bf16.
  Weight w = UploadF32(table, 30, 8);
  Buffer out_a = Zeros(8), out_b = Zeros(8);
  backend_->Embedding(**step_a, w, out_a.f32());
  backend_->Embedding(**step_b, w, out_b.f32());
  EXPECT_EQ(ToHost(out_a, 8), std::vector<float>(8, 11.0f));
  EXPECT_EQ(ToHost(out_b, 8), std::vector<float>(8, 22.0f));
}

}  // namespace
}  // namespace tandem
