#include "kernels/cpu/elementwise.h"

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

class ElementwiseTest : public ::testing::TestWithParam<SimdLevel> {};

TEST_P(ElementwiseTest, SiluMulMatchesReference) {
  ThreadPool pool(2);
  for (size_t n : {1, 7, 8, 9, 688, 100003}) {
    const auto gate = RandomVector(n, uint32_t(n), -12.0f, 12.0f);
    const auto up = RandomVector(n, uint32_t(n + 1), -2.0f, 2.0f);
    std::vector<float> expected(n), out(n);
    reference::SiluMul(gate.data(), up.data(), n, expected.data());
    SiluMul(GetParam(), &pool, gate.data(), up.data(), n, out.data());
    EXPECT_TRUE(AllClose(out, expected, 1e-5f, 1e-7f)) << "n=" << n;
  }
}

TEST_P(ElementwiseTest, SiluMulExtremesAndAliasing) {
  std::vector<float> gate = {-200.0f, -90.0f, 0.0f, 90.0f, 200.0f};
  const std::vector<float> up = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  std::vector<float> out(gate.size());
  SiluMul(GetParam(), nullptr, gate.data(), up.data(), gate.size(), out.data());
  EXPECT_NEAR(out[0], 0.0f, 1e-30f);
  EXPECT_NEAR(out[1], 0.0f, 1e-30f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 90.0f);
  EXPECT_EQ(out[4], 200.0f);
  SiluMul(GetParam(), nullptr, gate.data(), up.data(), gate.size(), gate.data());
  EXPECT_TRUE(BitwiseEqual(gate.data(), out.data(), out.size()));
}

// An element's value does not depend on n, its position in a vector, or the split.
TEST_P(ElementwiseTest, SiluMulElementsIndependentOfLengthAndThreads) {
  const size_t n = 70001;
  const auto gate = RandomVector(n, 1, -6.0f, 6.0f);
  const auto up = RandomVector(n, 2);
  std::vector<float> all(n);
  SiluMul(GetParam(), nullptr, gate.data(), up.data(), n, all.data());
  for (size_t offset : {1, 3, 13}) {
    for (int threads : {2, 4}) {
      ThreadPool pool(threads);
      std::vector<float> part(n - offset);
      SiluMul(GetParam(), &pool, gate.data() + offset, up.data() + offset, n - offset, part.data());
      ASSERT_TRUE(BitwiseEqual(part.data(), all.data() + offset, part.size()))
          << "offset=" << offset << " threads=" << threads;
    }
  }
}

TEST(AddTest, AddsInPlace) {
  ThreadPool pool(3);
  for (size_t n : {1, 9, 100000}) {
    auto x = RandomVector(n, 1);
    const auto y = RandomVector(n, 2);
    auto expected = x;
    for (size_t i = 0; i < n; ++i) expected[i] += y[i];
    Add(&pool, x.data(), y.data(), n);
    EXPECT_TRUE(BitwiseEqual(x.data(), expected.data(), n));
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, ElementwiseTest, ::testing::ValuesIn(AvailableSimdLevels()),
                         [](const auto& info) { return std::string(SimdLevelName(info.param)); });

}  // namespace
}  // namespace cpu
}  // namespace tandem
