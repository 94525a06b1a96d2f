// The verdict of `tandem bench --aa-control` on a row: is its speedup over `none`
// outside the run's own noise floor, the spread of the A/A control's ratios to `none`
// (plain decoding measured exactly like `none` in the same rounds)?
#ifndef TANDEM_CLIENT_BENCH_VERDICT_H_
#define TANDEM_CLIENT_BENCH_VERDICT_H_

#include <string>
#include <vector>

namespace tandem::client {

enum class NoiseVerdict { kFaster, kSlower, kWithinNoise, kTooFewRounds };

// Fewest rounds a verdict needs on each side: with fewer, a row as fast as `none` would
// be called faster or slower by chance too often (33 % at 2 rounds, see below).
inline constexpr int kMinVerdictRounds = 3;

// The range rule on per-round ratios to `none` (NaN entries ignored): kFaster when the
// row's smallest ratio is above the control's largest, kSlower when the row's largest is
// below the control's smallest, else kWithinNoise; kTooFewRounds when either side has
// fewer than kMinVerdictRounds finite ratios. It is the extreme case of a rank test
// (Mann-Whitney U = 0): see FalseVerdictChance.
NoiseVerdict CompareWithControl(const std::vector<double>& row_ratios,
                                const std::vector<double>& control_ratios);

// The rule of CompareWithControl in one sentence, for tables and JSON.
std::string VerdictRule();

// "faster", "slower", "within noise", "too few rounds".
std::string VerdictName(NoiseVerdict verdict);

// The chance that a row exactly as fast as `none` is called faster or slower: if its n
// ratios and the control's m come from one distribution, every order of the n + m values
// is equally likely and 2 of the C(n + m, n) ways to place the row's among them
// separate the two sides: 2 / C(n + m, n) (10 % at 3 rounds each, 0.8 % at 5). NaN
// when n or m is below 1.
double FalseVerdictChance(int n, int m);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_VERDICT_H_
