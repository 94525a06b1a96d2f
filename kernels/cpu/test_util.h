// Helpers shared by the CPU kernel tests: seeded random data and comparisons.
#ifndef TANDEM_KERNELS_CPU_TEST_UTIL_H_
#define TANDEM_KERNELS_CPU_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace cpu {
namespace testing {

inline std::vector<float> RandomVector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Every |actual - expected| <= abs_tol + rel_tol * |expected|; reports the first miss.
inline ::testing::AssertionResult AllClose(const std::vector<float>& actual,
                                           const std::vector<float>& expected, float rel_tol,
                                           float abs_tol) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << actual.size() << " vs " << expected.size();
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    const float diff = std::fabs(actual[i] - expected[i]);
    if (!(diff <= abs_tol + rel_tol * std::fabs(expected[i]))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << actual[i] << " vs "
                                           << expected[i] << " (diff " << diff << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Bitwise equality of `count` floats.
inline ::testing::AssertionResult BitwiseEqual(const float* actual, const float* expected,
                                               size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(actual + i, expected + i, sizeof(float)) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i << " differs: " << actual[i] << " vs " << expected[i];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace testing
}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_TEST_UTIL_H_
