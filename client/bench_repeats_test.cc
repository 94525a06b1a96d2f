#include "client/bench_repeats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "client/bench_test_rows.h"

namespace tandem::client {
namespace {

using ::testing::HasSubstr;

constexpr auto kNone = v1::SPECULATION_METHOD_NONE;
constexpr auto kDraft = v1::SPECULATION_METHOD_DRAFT;

// Three rounds of none and draft at concurrency 1, speedups within each round.
std::vector<RepeatedResult> ThreeRounds() {
  // none 10, 20, 40 (the machine got faster); draft 20, 20, 60: per-round ratios
  // 2.0, 1.0, 1.5 -> median 1.5, while the ratio of the medians is 20 / 20 = 1.0.
  const double none[] = {10, 20, 40}, draft[] = {20, 20, 60};
  std::vector<ConfigResult> rows;
  for (int round = 0; round < 3; ++round) {
    std::vector<ConfigResult> r = {BenchRow(kDraft, 1, round, draft[round]),
                                   BenchRow(kNone, 1, round, none[round])};
    ComputeSpeedups(&r);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  return GroupByConfig({{kNone, v1::PIPELINING_DEFAULT, 1}, {kDraft, v1::PIPELINING_DEFAULT, 1}},
                       rows);
}

TEST(SpreadTest, SpeedupIsTheMedianOfPerRoundRatios) {
  std::vector<RepeatedResult> results = ThreeRounds();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].key.method, kDraft);
  ASSERT_EQ(results[1].repeats.size(), 3u);
  const Distribution speedup = Spread(results[1], "/speedup_vs_none");
  EXPECT_DOUBLE_EQ(speedup.p50, 1.5);
  EXPECT_DOUBLE_EQ(speedup.min, 1.0);
  EXPECT_DOUBLE_EQ(speedup.max, 2.0);
  const Distribution tok_s = Spread(results[1], "/throughput_tok_s");
  EXPECT_DOUBLE_EQ(tok_s.p50, 20);
  EXPECT_DOUBLE_EQ(tok_s.max, 60);
  EXPECT_DOUBLE_EQ(Spread(results[0], "/speedup_vs_none").p50, 1.0);
}

TEST(SpreadTest, RoundsMissingAFigureAreIgnored) {
  RepeatedResult r;
  r.repeats = {BenchRow(kDraft, 1, 0, 5), BenchRow(kDraft, 1, 1, 7)};
  r.repeats[0].acceptance_rate = 0.5;  // The other round has NaN.
  EXPECT_DOUBLE_EQ(Spread(r, "/acceptance_rate").p50, 0.5);
  EXPECT_EQ(Spread(r, "/acceptance_rate").count, 1);
  EXPECT_EQ(Spread(r, "/no_such_figure").count, 0);
}

TEST(GroupByConfigTest, SortsByRoundAndKeepsConfigOrder) {
  std::vector<ConfigResult> rows = {BenchRow(kDraft, 4, 1, 3), BenchRow(kNone, 4, 0, 1),
                                    BenchRow(kDraft, 4, 0, 2), BenchRow(kDraft, 8, 0, 9)};
  std::vector<RepeatedResult> g = GroupByConfig(
      {{kDraft, v1::PIPELINING_DEFAULT, 4}, {kNone, v1::PIPELINING_DEFAULT, 4}}, rows);
  ASSERT_EQ(g.size(), 2u);
  ASSERT_EQ(g[0].repeats.size(), 2u);
  EXPECT_EQ(g[0].repeats[0].round, 0);
  EXPECT_EQ(g[0].repeats[1].throughput_tok_s, 3);
  EXPECT_EQ(g[1].repeats.size(), 1u);
}

TEST(RenderTest, TablesShowMediansAndRanges) {
  std::vector<RepeatedResult> results = ThreeRounds();
  const std::string table = RenderResultsTable(results);
  EXPECT_THAT(table, HasSubstr("1.50x [1.00-2.00]"));
  EXPECT_THAT(table, HasSubstr("20.0 [10.0-40.0]"));
  EXPECT_THAT(table, HasSubstr("12/12"));
  EXPECT_THAT(table, HasSubstr("3 interleaved rounds"));
  const std::string cost = RenderCostTable(results);
  EXPECT_THAT(cost, HasSubstr("S predicted"));
  // Every line of the cost table has as many cells as its header.
  const std::string header = cost.substr(cost.find("method"));
  EXPECT_THAT(header.substr(0, header.find('\n')), HasSubstr("conc  spec  alpha"));
  EXPECT_THAT(cost, ::testing::Not(HasSubstr("\nnone ")));
  EXPECT_THAT(cost, HasSubstr("\ndraft "));
}

TEST(RenderTest, OneRoundPrintsPlainValues) {
  std::vector<ConfigResult> rows = {BenchRow(kNone, 1, 0, 10), BenchRow(kDraft, 1, 0, 21)};
  rows[1].acceptance_rate = 0.5;
  ComputeSpeedups(&rows);
  const std::string table = RenderResultsTable(GroupByConfig(
      {{kNone, v1::PIPELINING_DEFAULT, 1}, {kDraft, v1::PIPELINING_DEFAULT, 1}}, rows));
  EXPECT_THAT(table, HasSubstr("2.10x"));
  EXPECT_THAT(table, HasSubstr("50.0%"));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("[")));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("rounds")));
}

TEST(ToJsonTest, MediansTotalsSpreadAndEveryRound) {
  std::vector<RepeatedResult> results = ThreeRounds();
  results[1].repeats[2].errors["unavailable"] = 1;
  nlohmann::json j = ToJson(results[1]);
  EXPECT_EQ(j["method"], "draft");
  EXPECT_EQ(j["rounds"], 3);
  EXPECT_EQ(j["requests"], 12);
  EXPECT_EQ(j["generated_tokens"], 300);
  EXPECT_EQ(j["errors"]["unavailable"], 1);
  EXPECT_DOUBLE_EQ(j["speedup_vs_none"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["spread"]["/speedup_vs_none"]["min"].get<double>(), 1.0);
  EXPECT_TRUE(j["ttft_ms"]["p50"].is_null());  // No latencies in these rows.
  EXPECT_TRUE(j["cost_terms"].contains("predicted_speedup"));
  ASSERT_EQ(j["repeats"].size(), 3u);
  EXPECT_EQ(j["repeats"][2]["round"], 2);
  EXPECT_DOUBLE_EQ(j["repeats"][0]["speedup_vs_none"].get<double>(), 2.0);
}

}  // namespace
}  // namespace tandem::client
