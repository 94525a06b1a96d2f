// SumInRankOrder against a naive per-element loop, across tile boundaries.
#include "comm/rank_order_sum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace tandem {
namespace {

std::vector<float> RandomMixedMagnitude(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> m(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-20, 20);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(m(rng), ex(rng));
  return v;
}

TEST(RankOrderSumTest, MatchesNaiveLoopBitwise) {
  for (int ranks : {1, 2, 3, 4, 8}) {
    for (size_t count : {size_t{1}, size_t{1023}, size_t{1024}, size_t{1025}, size_t{5000}}) {
      std::vector<float> gathered = RandomMixedMagnitude(count * ranks, ranks * 1000 + count);
      std::vector<float> expected(count);
      for (size_t e = 0; e < count; ++e) {
        float acc = gathered[e];
        for (int r = 1; r < ranks; ++r) acc = acc + gathered[r * count + e];
        expected[e] = acc;
      }
      std::vector<float> out(count, -1.0f);
      SumInRankOrder(gathered.data(), ranks, count, out.data());
      EXPECT_EQ(std::memcmp(out.data(), expected.data(), count * sizeof(float)), 0)
          << ranks << " ranks, count " << count;
    }
  }
}

TEST(RankOrderSumTest, OutputMayAliasAnInputBlock) {
  const size_t count = 2000;
  std::vector<float> gathered = RandomMixedMagnitude(count * 3, 7);
  std::vector<float> expected(count);
  SumInRankOrder(gathered.data(), 3, count, expected.data());
  SumInRankOrder(gathered.data(), 3, count, gathered.data());  // out = block 0
  EXPECT_EQ(std::memcmp(gathered.data(), expected.data(), count * sizeof(float)), 0);
}

TEST(RankOrderSumTest, SeparateBlocksMatchContiguous) {
  const size_t count = 3000;
  std::vector<float> a = RandomMixedMagnitude(count, 1), b = RandomMixedMagnitude(count, 2),
                     c = RandomMixedMagnitude(count, 3);
  std::vector<float> contiguous(a);
  contiguous.insert(contiguous.end(), b.begin(), b.end());
  contiguous.insert(contiguous.end(), c.begin(), c.end());
  const float* blocks[] = {a.data(), b.data(), c.data()};
  std::vector<float> x(count), y(count);
  SumInRankOrder(blocks, 3, count, x.data());
  SumInRankOrder(contiguous.data(), 3, count, y.data());
  EXPECT_EQ(std::memcmp(x.data(), y.data(), count * sizeof(float)), 0);
}

}  // namespace
}  // namespace tandem
