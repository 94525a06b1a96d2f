#include "tests/e2e/sample_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tandem::e2e {
namespace {

// Standard normal upper tail.
double NormalSurvival(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

// Bisection for the x in [lo, hi] where decreasing f(x) crosses target.
template <class F>
double SolveDecreasing(F f, double target, double lo, double hi) {
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (f(mid) > target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return 0.5 * (lo + hi);
}

ChiSquareTest Finish(double statistic, int cells, double alpha) {
  ChiSquareTest t;
  t.statistic = statistic;
  t.df = std::max(cells - 1, 0);
  t.critical = t.df > 0 ? ChiSquareQuantile(t.df, alpha) : 0;
  return t;
}

}  // namespace

double ChiSquareSurvival(double df, double x) {
  if (x <= 0) return 1.0;
  const double a = 2.0 / (9.0 * df);
  return NormalSurvival((std::cbrt(x / df) - (1 - a)) / std::sqrt(a));
}

double ChiSquareQuantile(double df, double alpha) {
  return SolveDecreasing([df](double x) { return ChiSquareSurvival(df, x); }, alpha, 0,
                         100 * df + 1000);
}

std::string ChiSquareTest::ToString() const {
  char text[96];
  std::snprintf(text, sizeof(text), "chi2 = %.1f, df = %d, critical = %.1f", statistic, df,
                critical);
  return text;
}

ChiSquareTest GoodnessOfFit(const Counts& counts, const Probabilities& reference, double alpha,
                            double min_expected) {
  double n = 0;
  for (const auto& [outcome, count] : counts) n += count;
  double statistic = 0, kept_p = 0, kept_count = 0;
  int cells = 0;
  for (const auto& [outcome, p] : reference) {
    if (n * p < min_expected) continue;
    const auto it = counts.find(outcome);
    const double x = it == counts.end() ? 0 : it->second;
    statistic += (x - n * p) * (x - n * p) / (n * p);
    kept_p += p;
    kept_count += x;
    ++cells;
  }
  const double rest_p = 1 - kept_p, rest_count = n - kept_count;
  if (n * rest_p >= min_expected) {
    statistic += (rest_count - n * rest_p) * (rest_count - n * rest_p) / (n * rest_p);
    ++cells;
  }
  return Finish(statistic, cells, alpha);
}

ChiSquareTest TwoSample(const Counts& a, const Counts& b, double alpha, int min_total) {
  double na = 0, nb = 0;
  std::map<Outcome, std::pair<double, double>> table;
  for (const auto& [outcome, count] : a) table[outcome].first += count, na += count;
  for (const auto& [outcome, count] : b) table[outcome].second += count, nb += count;
  std::vector<std::pair<double, double>> cells;
  std::pair<double, double> rest{0, 0};
  for (const auto& [outcome, xy] : table) {
    if (xy.first + xy.second >= min_total) {
      cells.push_back(xy);
    } else {
      rest.first += xy.first;
      rest.second += xy.second;
    }
  }
  if (rest.first + rest.second > 0) cells.push_back(rest);
  if (na == 0 || nb == 0) return Finish(0, 0, alpha);
  const double ra = std::sqrt(nb / na), rb = std::sqrt(na / nb);
  double statistic = 0;
  for (const auto& [x, y] : cells) statistic += (x * ra - y * rb) * (x * ra - y * rb) / (x + y);
  return Finish(statistic, static_cast<int>(cells.size()), alpha);
}

double ChiSquarePower(int df, double alpha, double lambda) {
  const double critical = ChiSquareQuantile(df, alpha);
  const double h = (df + 2 * lambda) / (df + lambda);
  const double nu = (df + lambda) * (df + lambda) / (df + 2 * lambda);
  return ChiSquareSurvival(nu, critical / h);
}

double DetectableShift(int n, int df, double alpha, double p_from, double p_to, double power) {
  // Power grows with lambda: find the lambda where it reaches `power`.
  const double lambda =
      SolveDecreasing([&](double l) { return -ChiSquarePower(df, alpha, l); }, -power, 0, 1e6);
  return std::sqrt(lambda / (n * (1 / p_from + 1 / p_to)));
}

Counts Marginal(const Counts& counts, int j) {
  Counts marginal;
  for (const auto& [outcome, count] : counts) {
    if (static_cast<int>(outcome.size()) > j) marginal[{outcome[j]}] += count;
  }
  return marginal;
}

}  // namespace tandem::e2e
