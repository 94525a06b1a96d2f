// Summary statistics of latency samples.
#ifndef TANDEM_CLIENT_STATS_H_
#define TANDEM_CLIENT_STATS_H_

#include <cmath>
#include <vector>

namespace tandem::client {

// The q-th percentile (q in [0, 100]) with linear interpolation between closest ranks
// (numpy's default): rank = q/100 * (n - 1). NaN for no values; q is clamped to [0, 100].
double Percentile(std::vector<double> values, double q);

// Every field but count is NaN while there are no samples.
struct Distribution {
  int count = 0;
  double mean = NAN, min = NAN, max = NAN;
  double p50 = NAN, p90 = NAN, p99 = NAN;
};

// Summary of `values` (all NaN fields but count when empty). NaN samples are ignored.
Distribution Summarize(const std::vector<double>& values);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_STATS_H_
