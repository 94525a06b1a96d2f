// CUDA softmax (with temperature) against the double-precision reference, and argmax
// against spec::Argmax (ties, NaN, infinities). Tolerance for probabilities:
// 1e-6 absolute + 1e-5 relative (float32 exp and a 32000-term float32 sum).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/reference.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_test_util.h"
#include "spec/sampling.h"

namespace tandem {
namespace {

class CudaSamplingTest : public cuda::testing::CudaTest {};

TEST_F(CudaSamplingTest, SoftmaxWithTemperature) {
  const int rows = 3, cols = 32000;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> logits(size_t(rows) * cols);
  for (float& x : logits) x = dist(rng);
  Buffer dl = ToDevice(logits), dp = Zeros(logits.size());
  for (float temperature : {1.0f, 0.7f, 2.5f}) {
    ASSERT_TRUE(backend_->Softmax(dl.f32(), rows, cols, temperature, dp.f32()).ok());
    const std::vector<float> got = ToHost(dp, logits.size());
    std::vector<float> scaled = logits, want(logits.size());
    for (float& x : scaled) x /= temperature;
    reference::Softmax(scaled.data(), rows, cols, want.data());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-6 + 1e-5 * want[i]) << "T " << temperature << " i " << i;
    }
  }
}

TEST_F(CudaSamplingTest, SoftmaxEdgeCases) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {1.0f, nan, 3.0f, 3.0f,   // NaN gets 0
                                     inf, 2.0f, inf, nan,     // +inf share the mass
                                     nan, nan, nan, nan};     // all NaN: zeros
  Buffer dl = ToDevice(logits), dp = Zeros(logits.size());
  ASSERT_TRUE(backend_->Softmax(dl.f32(), 3, 4, 1.0f, dp.f32()).ok());
  const std::vector<float> p = ToHost(dp, logits.size());
  const double z = std::exp(-2.0) + 2.0;
  EXPECT_NEAR(p[0], std::exp(-2.0) / z, 1e-6);
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_NEAR(p[2], 1.0 / z, 1e-6);
  EXPECT_EQ(p[2], p[3]);
  EXPECT_EQ(std::vector<float>(p.begin() + 4, p.begin() + 8),
            (std::vector<float>{0.5f, 0.0f, 0.5f, 0.0f}));
  EXPECT_EQ(std::vector<float>(p.begin() + 8, p.end()), std::vector<float>(4, 0.0f));
  EXPECT_EQ(backend_->Softmax(dl.f32(), 3, 4, 0.0f, dp.f32()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaSamplingTest, ArgmaxMatchesSpec) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int cols = 1000;
  std::vector<std::vector<float>> rows;
  std::mt19937 rng(2);
  std::uniform_int_distribution<int> small(-3, 3);  // Many ties.
  for (int r = 0; r < 5; ++r) {
    std::vector<float> row(cols);
    for (float& x : row) x = float(small(rng));
    rows.push_back(row);
  }
  rows[1][999] = 100.0f;                        // Maximum in the last column.
  rows[2].assign(cols, nan);                    // All NaN -> -1.
  rows[3].assign(cols, -inf);                   // All -inf -> 0.
  rows[3][500] = nan;
  rows[4][0] = nan;                             // NaN first, then ties.
  std::vector<float> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  Buffer dl = ToDevice(flat);
  Buffer dout = Zeros(rows.size());
  ASSERT_TRUE(backend_->Argmax(dl.f32(), int(rows.size()), cols,
                               static_cast<int32_t*>(dout.data())).ok());
  const std::vector<int32_t> got = ToHost<int32_t>(dout, rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(got[r], spec::Argmax(rows[r])) << "row " << r;
  }
  EXPECT_EQ(got[2], -1);
}

}  // namespace
}  // namespace tandem
