#include "client/bench_baseline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/bench_test_rows.h"

namespace tandem::client {
namespace {

using ::testing::HasSubstr;

constexpr auto kNone = v1::SPECULATION_METHOD_NONE;
constexpr auto kDraft = v1::SPECULATION_METHOD_DRAFT;

// This server: none 10, 20, 40 and draft 15, 10, 60 at concurrency 1 over three rounds;
// the baseline 20, 20, 40 (the machine got faster in round 3).
std::vector<RepeatedResult> Results() {
  RepeatedResult none{{kNone, v1::PIPELINING_DEFAULT, 1}, {}};
  RepeatedResult draft{{kDraft, v1::PIPELINING_DEFAULT, 1}, {}};
  const double none_tok_s[] = {10, 20, 40}, draft_tok_s[] = {15, 10, 60};
  for (int round = 0; round < 3; ++round) {
    none.repeats.push_back(BenchRow(kNone, 1, round, none_tok_s[round]));
    draft.repeats.push_back(BenchRow(kDraft, 1, round, draft_tok_s[round]));
  }
  return {none, draft};
}

TEST(BenchBaselineTest, MediansOfPerRoundRatios) {
  const std::vector<ConfigResult> baseline = {BenchRow(kNone, 1, 0, 20), BenchRow(kNone, 1, 1, 20),
                                              BenchRow(kNone, 1, 2, 40)};
  const std::vector<BaselineComparison> rows = CompareWithBaseline(baseline, Results());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].concurrency, 1);
  EXPECT_DOUBLE_EQ(rows[0].baseline_tok_s.p50, 20);
  EXPECT_DOUBLE_EQ(rows[0].baseline_tok_s.max, 40);
  // none / baseline per round: 0.5, 1.0, 1.0 -> median 1.0.
  EXPECT_DOUBLE_EQ(rows[0].none_ratio.p50, 1.0);
  EXPECT_DOUBLE_EQ(rows[0].none_ratio.min, 0.5);
  // Fastest per round: draft 15, none 20, draft 60 -> 0.75, 1.0, 1.5; median 1.0.
  EXPECT_DOUBLE_EQ(rows[0].fastest_ratio.p50, 1.0);
  EXPECT_DOUBLE_EQ(rows[0].fastest_ratio.max, 1.5);
  EXPECT_EQ(rows[0].fastest, "draft");  // Fastest in two rounds of three.
}

TEST(BenchBaselineTest, RoundsMeasuredOnOneSideOnlyAreLeftOut) {
  // Round 5 has no rows on this server; concurrency 4 none at all; a failed baseline
  // round (0 tok/s) does not count.
  const std::vector<ConfigResult> baseline = {BenchRow(kNone, 1, 0, 0), BenchRow(kNone, 1, 1, 40),
                                              BenchRow(kNone, 1, 5, 10), BenchRow(kNone, 4, 0, 50)};
  const std::vector<BaselineComparison> rows = CompareWithBaseline(baseline, Results());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].baseline_tok_s.p50, 40);
  EXPECT_DOUBLE_EQ(rows[0].none_ratio.p50, 0.5);
  EXPECT_EQ(rows[0].fastest, "none");
}

TEST(BenchBaselineTest, TheAaControlTakesNoPart) {
  // A control far faster than anything else would be this server's `none` and its
  // fastest row if it counted.
  std::vector<RepeatedResult> results = Results();
  results.push_back({{kNone, v1::PIPELINING_DEFAULT, 1, v1::ACCEPTANCE_RULE_DEFAULT, true},
                     {ControlRow(1, 0, 900), ControlRow(1, 1, 900), ControlRow(1, 2, 900)}});
  const std::vector<ConfigResult> baseline = {BenchRow(kNone, 1, 0, 20), BenchRow(kNone, 1, 1, 20),
                                              BenchRow(kNone, 1, 2, 40)};
  const std::vector<BaselineComparison> rows = CompareWithBaseline(baseline, results);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].none_ratio.p50, 1.0);
  EXPECT_DOUBLE_EQ(rows[0].fastest_ratio.max, 1.5);
  EXPECT_EQ(rows[0].fastest, "draft");
}

TEST(BenchBaselineTest, TableAndJson) {
  const std::vector<ConfigResult> baseline = {BenchRow(kNone, 1, 0, 20), BenchRow(kNone, 1, 1, 20),
                                              BenchRow(kNone, 1, 2, 40)};
  const std::vector<BaselineComparison> rows = CompareWithBaseline(baseline, Results());
  const std::string table = RenderBaselineTable("localhost:1, target tp 1", rows);
  EXPECT_THAT(table, HasSubstr("localhost:1, target tp 1"));
  EXPECT_THAT(table, HasSubstr("1.00x [0.75-1.50]"));
  const nlohmann::json json = ToJson(rows[0]);
  EXPECT_EQ(json["fastest_method"], "draft");
  EXPECT_DOUBLE_EQ(json["none_over_baseline"]["median"].get<double>(), 1.0);
}

}  // namespace
}  // namespace tandem::client
