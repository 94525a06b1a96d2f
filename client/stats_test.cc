#include "client/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tandem::client {
namespace {

// Independent reference: the definition of linear-interpolated percentiles written
// out with an explicit scan (no sort) in long double.
double ReferencePercentile(const std::vector<double>& v, double q) {
  const long double rank = static_cast<long double>(q) / 100.0L * (v.size() - 1);
  const size_t k = static_cast<size_t>(rank);  // k-th smallest (0-based)
  auto kth = [&v](size_t k) {
    for (double candidate : v) {
      size_t less = 0, equal = 0;
      for (double x : v) {
        if (x < candidate) ++less;
        if (x == candidate) ++equal;
      }
      if (less <= k && k < less + equal) return static_cast<long double>(candidate);
    }
    return static_cast<long double>(NAN);
  };
  const long double lo = kth(k);
  const long double hi = kth(std::min(k + 1, v.size() - 1));
  return static_cast<double>(lo + (hi - lo) * (rank - k));
}

TEST(PercentileTest, SmallExamplesByHand) {
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile({10, 20}, 90), 19);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
  EXPECT_DOUBLE_EQ(Percentile({1, 2}, 150), 2);  // Clamped.
}

TEST(PercentileTest, MatchesReferenceOnRandomData) {
  std::mt19937 rng(7);
  std::exponential_distribution<double> latency(0.05);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> v(1 + rng() % 200);
    for (double& x : v) x = std::round(latency(rng) * 10) / 10;  // With ties.
    for (double q : {0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0}) {
      EXPECT_NEAR(Percentile(v, q), ReferencePercentile(v, q), 1e-9) << "n=" << v.size();
    }
  }
}

TEST(SummarizeTest, MeanMinMaxAndPercentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  v.push_back(NAN);  // Ignored.
  Distribution d = Summarize(v);
  EXPECT_EQ(d.count, 100);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 100);
  EXPECT_DOUBLE_EQ(d.p50, 50.5);
  EXPECT_DOUBLE_EQ(d.p90, 90.1);
  EXPECT_DOUBLE_EQ(d.p99, 99.01);
  Distribution empty = Summarize({});
  EXPECT_EQ(empty.count, 0);
  EXPECT_TRUE(std::isnan(empty.p50));
}

}  // namespace
}  // namespace tandem::client
