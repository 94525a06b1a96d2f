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

// Five rounds at concurrency 1 of none (100 tok/s), its A/A control (97, 108, 93, 102,
// 100: ratios 0.93-1.08, median 1.00) and draft at `draft[round]` tok/s.
std::vector<RepeatedResult> FiveRoundsWithControl(const std::vector<double>& draft) {
  const double control[] = {97, 108, 93, 102, 100};
  std::vector<ConfigResult> rows;
  for (int round = 0; round < 5; ++round) {
    std::vector<ConfigResult> r = {ControlRow(1, round, control[round]),
                                   BenchRow(kDraft, 1, round, draft[round]),
                                   BenchRow(kNone, 1, round, 100)};
    ComputeSpeedups(&r);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  return GroupByConfig({{kNone, v1::PIPELINING_DEFAULT, 1},
                        {kNone, v1::PIPELINING_DEFAULT, 1, v1::ACCEPTANCE_RULE_DEFAULT, true},
                        {kDraft, v1::PIPELINING_DEFAULT, 1}},
                       rows);
}

TEST(ControlTest, VerdictOfEachRowAgainstTheControlsRatios) {
  const std::vector<RepeatedResult> faster = FiveRoundsWithControl({110, 135, 109, 120, 150});
  ASSERT_EQ(faster.size(), 3u);
  EXPECT_EQ(ControlFor(faster, faster[2]), &faster[1]);
  EXPECT_EQ(ControlFor(faster, faster[0]), nullptr);  // `none` gets no verdict,
  EXPECT_EQ(ControlFor(faster, faster[1]), nullptr);  // nor does the control itself.
  const Distribution floor = Spread(faster[1], "/speedup_vs_none");
  EXPECT_DOUBLE_EQ(floor.p50, 1.0);
  EXPECT_NEAR(floor.min, 0.93, 1e-12);
  EXPECT_NEAR(floor.max, 1.08, 1e-12);
  EXPECT_EQ(VerdictAgainstControl(faster[2], faster[1]), NoiseVerdict::kFaster);
  const std::vector<RepeatedResult> slower = FiveRoundsWithControl({80, 92, 85, 70, 90});
  EXPECT_EQ(VerdictAgainstControl(slower[2], slower[1]), NoiseVerdict::kSlower);
  // Median 1.22x, but round 3 (1.05x) is inside the control's range.
  const std::vector<RepeatedResult> noisy = FiveRoundsWithControl({120, 125, 105, 130, 122});
  EXPECT_EQ(VerdictAgainstControl(noisy[2], noisy[1]), NoiseVerdict::kWithinNoise);
}

TEST(ControlTest, TheControlOfTheRowsLevelAndRule) {
  const auto kCoupled = v1::ACCEPTANCE_RULE_COUPLED;
  const auto kRejection = v1::ACCEPTANCE_RULE_REJECTION;
  std::vector<RepeatedResult> results = {{{kNone, v1::PIPELINING_DEFAULT, 1, kCoupled, true}, {}},
                                         {{kNone, v1::PIPELINING_DEFAULT, 1, kRejection, true}, {}},
                                         {{kNone, v1::PIPELINING_DEFAULT, 4, kCoupled, true}, {}},
                                         {{kDraft, v1::PIPELINING_ON, 1, kRejection}, {}},
                                         {{kDraft, v1::PIPELINING_ON, 4, kRejection}, {}},
                                         {{kDraft, v1::PIPELINING_ON, 8, kRejection}, {}}};
  EXPECT_EQ(ControlFor(results, results[3]), &results[1]);
  EXPECT_EQ(ControlFor(results, results[4]), &results[2]);  // Another rule, same level.
  EXPECT_EQ(ControlFor(results, results[5]), nullptr);
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

TEST(RenderTest, ControlRowAndVerdictColumn) {
  const std::string table = RenderResultsTable(FiveRoundsWithControl({110, 135, 109, 120, 150}));
  EXPECT_THAT(table, HasSubstr("vs A/A"));
  EXPECT_THAT(table, HasSubstr("\nnone (A/A) "));
  EXPECT_THAT(table, HasSubstr("1.00x [0.93-1.08]"));
  EXPECT_THAT(table, HasSubstr("1.20x [1.09-1.50]"));
  EXPECT_THAT(table, HasSubstr(" faster\n"));
  EXPECT_THAT(table, HasSubstr("0.8% at 5 rounds"));
  EXPECT_THAT(RenderResultsTable(ThreeRounds()), ::testing::Not(HasSubstr("A/A")));
}

TEST(ToJsonTest, ResultsJsonMarksTheControlAndGivesEachRowItsVerdict) {
  const nlohmann::json j = ResultsJson(FiveRoundsWithControl({80, 92, 85, 70, 90}));
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["aa_control"], false);
  EXPECT_FALSE(j[0].contains("vs_aa_control"));
  EXPECT_EQ(j[1]["aa_control"], true);
  EXPECT_EQ(j[1]["label"], "none (A/A)");
  EXPECT_EQ(j[1]["method"], "none");
  EXPECT_FALSE(j[1].contains("vs_aa_control"));
  ASSERT_EQ(j[1]["repeats"].size(), 5u);  // Every round of the control is kept.
  EXPECT_EQ(j[1]["repeats"][4]["aa_control"], true);
  const nlohmann::json& v = j[2]["vs_aa_control"];
  EXPECT_EQ(v["verdict"], "slower");
  EXPECT_THAT(v["rule"].get<std::string>(), HasSubstr("smallest per-round speedup"));
  EXPECT_NEAR(v["control_speedup"]["min"].get<double>(), 0.93, 1e-12);
  EXPECT_NEAR(v["control_speedup"]["max"].get<double>(), 1.08, 1e-12);
  EXPECT_EQ(v["rounds"], nlohmann::json({5, 5}));
  EXPECT_NEAR(v["false_verdict_chance"].get<double>(), 2.0 / 252, 1e-12);
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
