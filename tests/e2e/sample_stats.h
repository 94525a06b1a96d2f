// Statistics for end-to-end tests of sampled outputs: chi-square tests of observed
// outcome counts against exact probabilities or against a second sample, and the power
// of those tests. An outcome is a short window of generated token ids.
//
// Approximations: chi-square tail probabilities and quantiles use Wilson-Hilferty
// (relative error of a quantile below ~2% for df >= 2 and significance >= 1e-5); the
// power of a test under a shift uses Patnaik's approximation of the noncentral
// chi-square. sample_stats_test checks both by simulation.
#ifndef TANDEM_TESTS_E2E_SAMPLE_STATS_H_
#define TANDEM_TESTS_E2E_SAMPLE_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tandem::e2e {

using Outcome = std::vector<int32_t>;
using Counts = std::map<Outcome, int>;
using Probabilities = std::map<Outcome, double>;

// P(X > x) for X ~ chi-square(df), df > 0 (not necessarily an integer).
double ChiSquareSurvival(double df, double x);
// The x with ChiSquareSurvival(df, x) = alpha, alpha in (0, 1).
double ChiSquareQuantile(double df, double alpha);

struct ChiSquareTest {
  double statistic = 0;
  int df = 0;           // Cells - 1.
  double critical = 0;  // Upper `alpha` quantile of chi-square(df).
  bool rejected() const { return df > 0 && statistic > critical; }
  std::string ToString() const;  // "chi2 = 12.3, df = 7, critical = 24.3"
};

// Goodness of fit of `counts` (n = their sum) to exact probabilities `reference` of
// some outcomes. The cells are the outcomes of `reference` whose expected count n p
// is at least `min_expected`; every other outcome (a smaller expectation, or absent
// from `reference`) counts in one residual cell of probability 1 - (sum of the kept
// cells' p), dropped when that is below min_expected / n. The cells depend on
// `reference` and n only, never on `counts`, so under H0 the statistic follows
// chi-square(cells - 1).
ChiSquareTest GoodnessOfFit(const Counts& counts, const Probabilities& reference, double alpha,
                            double min_expected = 5);

// Two-sample test of homogeneity of `a` and `b` (any sizes): outcomes seen fewer than
// `min_total` times in both together are pooled into one cell.
ChiSquareTest TwoSample(const Counts& a, const Counts& b, double alpha, int min_total = 10);

// The probability mass e that, moved from an outcome of probability p_from to one of
// probability p_to (both > 0), a GoodnessOfFit test with n draws, df degrees of
// freedom and significance alpha detects with probability `power`; its noncentrality
// is n e^2 (1/p_from + 1/p_to).
double DetectableShift(int n, int df, double alpha, double p_from, double p_to, double power = 0.9);

// The probability that a chi-square(df) test at significance alpha rejects under
// noncentrality lambda (Patnaik).
double ChiSquarePower(int df, double alpha, double lambda);

// Counts of the j-th token of each outcome (outcomes shorter than j + 1 are skipped).
Counts Marginal(const Counts& counts, int j);

}  // namespace tandem::e2e

#endif  // TANDEM_TESTS_E2E_SAMPLE_STATS_H_
