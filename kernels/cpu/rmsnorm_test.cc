#include "kernels/cpu/rmsnorm.h"

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

class RmsNormTest : public ::testing::TestWithParam<SimdLevel> {};

TEST_P(RmsNormTest, MatchesReference) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (int rows : {1, 2, 5, 37}) {
    for (int dim : {1, 3, 8, 20, 63, 256, 4099}) {
      const auto x = RandomVector(size_t(rows) * dim, seed++, -3.0f, 3.0f);
      const auto w = RandomVector(dim, seed++, 0.5f, 1.5f);
      std::vector<float> expected(x.size()), out(x.size());
      reference::RmsNorm(x.data(), w.data(), rows, dim, 1e-6f, expected.data());
      RmsNorm(GetParam(), &pool, x.data(), w.data(), rows, dim, 1e-6f, out.data());
      EXPECT_TRUE(AllClose(out, expected, 1e-5f, 1e-6f)) << "rows=" << rows << " dim=" << dim;
    }
  }
}

TEST_P(RmsNormTest, InPlaceAndEpsilon) {
  const int dim = 12;
  std::vector<float> x(dim, 0.0f);
  const std::vector<float> w(dim, 2.0f);
  x[0] = 1e-4f;
  std::vector<float> expected(dim);
  reference::RmsNorm(x.data(), w.data(), 1, dim, 1e-2f, expected.data());
  RmsNorm(GetParam(), nullptr, x.data(), w.data(), 1, dim, 1e-2f, x.data());
  EXPECT_TRUE(AllClose(x, expected, 1e-5f, 1e-9f));
  EXPECT_NEAR(x[0], 2.0f * 1e-4f / std::sqrt(1e-8f / dim + 1e-2f), 1e-9f);
}

TEST_P(RmsNormTest, BatchInvariant) {
  const int total = 37, dim = 259;
  const auto x = RandomVector(size_t(total) * dim, 7, -2.0f, 2.0f);
  const auto w = RandomVector(dim, 8);
  std::vector<float> alone(x.size());
  for (int r = 0; r < total; ++r) {
    RmsNorm(GetParam(), nullptr, x.data() + size_t(r) * dim, w.data(), 1, dim, 1e-5f,
            alone.data() + size_t(r) * dim);
  }
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int rows = 2; rows <= total; ++rows) {
      const int begin = (rows * 5) % (total - rows + 1);
      std::vector<float> out(size_t(rows) * dim);
      RmsNorm(GetParam(), &pool, x.data() + size_t(begin) * dim, w.data(), rows, dim, 1e-5f,
              out.data());
      ASSERT_TRUE(BitwiseEqual(out.data(), alone.data() + size_t(begin) * dim, out.size()))
          << "threads=" << threads << " rows=" << rows;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, RmsNormTest, ::testing::ValuesIn(AvailableSimdLevels()),
                         [](const auto& info) { return std::string(SimdLevelName(info.param)); });

}  // namespace
}  // namespace cpu
}  // namespace tandem
