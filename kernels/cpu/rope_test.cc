#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/reference.h"
#include "kernels/cpu/test_util.h"

namespace tandem {
namespace cpu {
namespace {

using testing::AllClose;
using testing::RandomVector;

std::vector<float> InvFreq(int head_dim, double theta) {
  std::vector<float> f(head_dim / 2);
  for (int j = 0; j < head_dim / 2; ++j) f[j] = float(std::pow(theta, -2.0 * j / head_dim));
  return f;
}

TEST(RopeTest, MatchesReference) {
  for (int head_dim : {2, 20, 32, 64}) {
    for (int num_heads : {1, 3, 8}) {
      const std::vector<int32_t> positions = {0, 1, 2, 17, 255, 1000, 4095, 70000};
      const int rows = static_cast<int>(positions.size());
      const auto inv_freq = InvFreq(head_dim, 10000.0);
      auto x = RandomVector(size_t(rows) * num_heads * head_dim, head_dim * 10 + num_heads);
      auto expected = x;
      reference::Rope(positions, expected.data(), num_heads, head_dim, inv_freq.data());
      const RopeTable table = BuildRopeTable(positions.data(), rows, inv_freq.data(), head_dim / 2);
      ApplyRope(table, x.data(), num_heads, head_dim);
      EXPECT_TRUE(AllClose(x, expected, 1e-5f, 1e-6f))
          << "head_dim=" << head_dim << " heads=" << num_heads;
    }
  }
}

TEST(RopeTest, PositionZeroIsIdentityAndRotationIsNormPreserving) {
  const int head_dim = 8, rows = 2;
  const std::vector<int32_t> positions = {0, 5};
  const auto inv_freq = InvFreq(head_dim, 500000.0);
  const auto original = RandomVector(size_t(rows) * head_dim, 3);
  auto x = original;
  ApplyRope(BuildRopeTable(positions.data(), rows, inv_freq.data(), head_dim / 2), x.data(), 1,
            head_dim);
  for (int i = 0; i < head_dim; ++i) EXPECT_EQ(x[i], original[i]);
  for (int j = 0; j < head_dim / 2; ++j) {
    const float* a = original.data() + head_dim;
    const float* b = x.data() + head_dim;
    EXPECT_NEAR(a[j] * a[j] + a[j + 4] * a[j + 4], b[j] * b[j] + b[j + 4] * b[j + 4], 1e-6f);
  }
  // Pair (0, 4) at position 5 with frequency 1 rotates by 5 radians.
  const float* a = original.data() + head_dim;
  EXPECT_NEAR(x[head_dim], a[0] * std::cos(5.0f) - a[4] * std::sin(5.0f), 1e-6f);
  EXPECT_NEAR(x[head_dim + 4], a[4] * std::cos(5.0f) + a[0] * std::sin(5.0f), 1e-6f);
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
