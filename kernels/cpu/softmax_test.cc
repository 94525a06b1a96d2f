#include "kernels/cpu/softmax.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/reference.h"
#include "kernels/cpu/test_util.h"

namespace tandem {
namespace cpu {
namespace {

using testing::AllClose;
using testing::BitwiseEqual;
using testing::RandomVector;

class SoftmaxTest : public ::testing::TestWithParam<SimdLevel> {};

TEST_P(SoftmaxTest, MatchesReference) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (int rows : {1, 3, 9}) {
    for (int cols : {1, 2, 7, 8, 9, 100, 2048, 4097}) {
      for (float range : {1.0f, 30.0f}) {
        const auto x = RandomVector(size_t(rows) * cols, seed++, -range, range);
        std::vector<float> expected(x.size()), out(x.size());
        reference::Softmax(x.data(), rows, cols, expected.data());
        Softmax(GetParam(), &pool, x.data(), rows, cols, out.data());
        EXPECT_TRUE(AllClose(out, expected, 1e-5f, 1e-9f))
            << "rows=" << rows << " cols=" << cols << " range=" << range;
      }
    }
  }
}

TEST_P(SoftmaxTest, StableForLargeInputsAndMaskedEntries) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {1000.0f, 999.0f, -inf, 1000.0f, -inf, -inf, -inf, -inf, -inf, 998.0f};
  std::vector<float> out(x.size());
  Softmax(GetParam(), nullptr, x.data(), 1, static_cast<int>(x.size()), out.data());
  const double z = 2 + std::exp(-1.0) + std::exp(-2.0);
  EXPECT_NEAR(out[0], 1 / z, 1e-6);
  EXPECT_NEAR(out[1], std::exp(-1.0) / z, 1e-6);
  EXPECT_NEAR(out[9], std::exp(-2.0) / z, 1e-6);
  for (int i : {2, 4, 5, 6, 7, 8}) EXPECT_EQ(out[i], 0.0f) << i;
  // In place.
  Softmax(GetParam(), nullptr, x.data(), 1, static_cast<int>(x.size()), x.data());
  EXPECT_TRUE(BitwiseEqual(x.data(), out.data(), x.size()));
}

TEST_P(SoftmaxTest, RowsIndependentOfBatch) {
  const int total = 37, cols = 301;
  const auto x = RandomVector(size_t(total) * cols, 5, -8.0f, 8.0f);
  std::vector<float> alone(x.size());
  for (int r = 0; r < total; ++r) {
    SoftmaxRow(GetParam(), x.data() + size_t(r) * cols, cols, alone.data() + size_t(r) * cols);
  }
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    std::vector<float> out(x.size());
    Softmax(GetParam(), &pool, x.data(), total, cols, out.data());
    EXPECT_TRUE(BitwiseEqual(out.data(), alone.data(), out.size())) << "threads=" << threads;
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, SoftmaxTest, ::testing::ValuesIn(AvailableSimdLevels()),
                         [](const auto& info) { return std::string(SimdLevelName(info.param)); });

}  // namespace
}  // namespace cpu
}  // namespace tandem
