#include "spec/rng.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace spec {
namespace {

// Known-answer vectors of Random123 (kat_vectors, philox4x32 with 10 rounds).
TEST(Philox4x32Test, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(Philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(Philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(Philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(UnitDoubleTest, CoversZeroToJustBelowOne) {
  EXPECT_EQ(UnitDoubleFromBits(0), 0.0);
  EXPECT_EQ(UnitDoubleFromBits(~uint64_t{0}), 1.0 - std::ldexp(1.0, -53));
  EXPECT_LT(UnitDoubleFromBits(~uint64_t{0}), 1.0);
  EXPECT_EQ(UnitDoubleFromBits(uint64_t{1} << 63), 0.5);
  // Only the top 53 bits count.
  EXPECT_EQ(UnitDoubleFromBits((uint64_t{1} << 11) - 1), 0.0);
}

TEST(UniformDoubleTest, IsAPureFunctionOfItsKey) {
  const double a = UniformDouble(42, RandomStream::kAccept, 7, 0);
  EXPECT_EQ(a, UniformDouble(42, RandomStream::kAccept, 7, 0));
  // Changing any single component changes the value.
  EXPECT_NE(a, UniformDouble(43, RandomStream::kAccept, 7, 0));
  EXPECT_NE(a, UniformDouble(42, RandomStream::kResample, 7, 0));
  EXPECT_NE(a, UniformDouble(42, RandomStream::kAccept, 8, 0));
  EXPECT_NE(a, UniformDouble(42, RandomStream::kAccept, 7, 1));
  // High words of seed and position are used.
  EXPECT_NE(a, UniformDouble(42 + (uint64_t{1} << 32), RandomStream::kAccept, 7, 0));
  EXPECT_NE(a, UniformDouble(42, RandomStream::kAccept, 7 + (uint64_t{1} << 32), 0));
}

TEST(UniformDoubleTest, MatchesPhiloxWordLayout) {
  const uint64_t seed = 0x0123456789abcdefull;
  const uint64_t position = 0x0000000500000009ull;
  const PhiloxCounter out = Philox4x32_10({0x9u, 0x5u, 3u, 2u}, {0x89abcdefu, 0x01234567u});
  const uint64_t bits = (static_cast<uint64_t>(out[0]) << 32) | out[1];
  EXPECT_EQ(UniformDouble(seed, RandomStream::kResample, position, 3),
            static_cast<double>(bits >> 11) / 9007199254740992.0);
}

TEST(GumbelNoiseTest, IsMinusLogMinusLogOfTheGumbelStreamDrawnPerToken) {
  for (int32_t token : {0, 1, 2047, 31999}) {
    const double u = UniformDouble(99, RandomStream::kGumbel, 1234, static_cast<uint32_t>(token));
    EXPECT_EQ(GumbelNoise(99, 1234, token), -std::log(-std::log(u)));
  }
  EXPECT_NE(GumbelNoise(99, 1234, 5), GumbelNoise(99, 1235, 5));
  EXPECT_NE(GumbelNoise(99, 1234, 5), GumbelNoise(100, 1234, 5));
  // Mean of the standard Gumbel: the Euler-Mascheroni constant.
  double sum = 0.0;
  constexpr int kDraws = 200000;
  for (int i = 0; i < kDraws; ++i) sum += GumbelNoise(7, i, i % 13);
  EXPECT_NEAR(sum / kDraws, 0.5772156649, 5 * 1.2825 / std::sqrt(kDraws));
}

// Upper critical value of chi-square with `dof` degrees of freedom at significance
// 1e-6 (one-sided normal quantile z = 4.753), Wilson-Hilferty approximation.
double ChiSquareCritical1e6(int dof) {
  const double z = 4.753;
  const double a = 2.0 / (9.0 * dof);
  return dof * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

double ChiSquare(const std::vector<int64_t>& counts, double expected) {
  double chi = 0.0;
  for (int64_t c : counts) chi += (c - expected) * (c - expected) / expected;
  return chi;
}

TEST(UniformDoubleTest, IsUniformPerStream) {
  constexpr int kBins = 100;
  constexpr int kDraws = 1000000;
  const double bound = ChiSquareCritical1e6(kBins - 1);  // ~181
  for (RandomStream stream : {RandomStream::kDraftSample, RandomStream::kAccept,
                              RandomStream::kResample, RandomStream::kProposer}) {
    std::vector<int64_t> counts(kBins, 0);
    double sum = 0.0;
    for (int i = 0; i < kDraws; ++i) {
      const double u = UniformDouble(2024, stream, i);
      ASSERT_GE(u, 0.0);
      ASSERT_LT(u, 1.0);
      sum += u;
      ++counts[static_cast<int>(u * kBins)];
    }
    const double chi = ChiSquare(counts, static_cast<double>(kDraws) / kBins);
    EXPECT_LT(chi, bound) << "stream " << static_cast<int>(stream);
    // Mean of U(0,1): sd of the sample mean is sqrt(1/12/N) ~ 2.9e-4; allow 6 sd.
    EXPECT_NEAR(sum / kDraws, 0.5, 6 * std::sqrt(1.0 / 12 / kDraws));
  }
}

// 2-D chi-square on a 16 x 16 grid of (u_a, u_b) pairs: independent uniforms fill it
// evenly. Covers pairs that the speculation loop reads together.
void ExpectIndependent(const char* what, double (*first)(int), double (*second)(int)) {
  constexpr int kGrid = 16;
  constexpr int kPairs = 512000;
  std::vector<int64_t> counts(kGrid * kGrid, 0);
  double sum_ab = 0.0, sum_a = 0.0, sum_b = 0.0;
  for (int i = 0; i < kPairs; ++i) {
    const double a = first(i), b = second(i);
    ++counts[static_cast<int>(a * kGrid) * kGrid + static_cast<int>(b * kGrid)];
    sum_ab += a * b;
    sum_a += a;
    sum_b += b;
  }
  const double chi = ChiSquare(counts, static_cast<double>(kPairs) / (kGrid * kGrid));
  EXPECT_LT(chi, ChiSquareCritical1e6(kGrid * kGrid - 1)) << what;
  // Covariance of independent U(0,1): 0, sd of the estimate 1/12/sqrt(N) ~ 1.2e-4.
  const double covariance = sum_ab / kPairs - (sum_a / kPairs) * (sum_b / kPairs);
  EXPECT_LT(std::fabs(covariance), 6.0 / 12.0 / std::sqrt(kPairs)) << what;
}

TEST(UniformDoubleTest, StreamsPositionsDrawsAndSeedsAreIndependent) {
  ExpectIndependent(
      "draft vs accept at the same position",
      [](int i) { return UniformDouble(7, RandomStream::kDraftSample, i); },
      [](int i) { return UniformDouble(7, RandomStream::kAccept, i); });
  ExpectIndependent(
      "accept vs resample at the same position",
      [](int i) { return UniformDouble(7, RandomStream::kAccept, i); },
      [](int i) { return UniformDouble(7, RandomStream::kResample, i); });
  ExpectIndependent(
      "consecutive positions", [](int i) { return UniformDouble(7, RandomStream::kResample, i); },
      [](int i) { return UniformDouble(7, RandomStream::kResample, i + 1); });
  ExpectIndependent(
      "draw 0 vs draw 1", [](int i) { return UniformDouble(7, RandomStream::kAccept, i, 0); },
      [](int i) { return UniformDouble(7, RandomStream::kAccept, i, 1); });
  ExpectIndependent(
      "adjacent seeds", [](int i) { return UniformDouble(7, RandomStream::kAccept, i); },
      [](int i) { return UniformDouble(8, RandomStream::kAccept, i); });
}

}  // namespace
}  // namespace spec
}  // namespace tandem
