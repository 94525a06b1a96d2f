#include "client/bench_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace tandem::client {
namespace {

using ::testing::HasSubstr;

RequestResult Ok(const std::string& text, int tokens, int proposed, int accepted, int steps,
                 double ttft, double tpot) {
  RequestResult r;
  r.text = text;
  r.has_stats = true;
  r.stats.set_generated_tokens(tokens);
  r.stats.set_draft_tokens_proposed(proposed);
  r.stats.set_draft_tokens_accepted(accepted);
  r.stats.set_target_steps(steps);
  r.stats.set_mean_accepted_length(steps > 0 ? static_cast<float>(tokens) / steps : 0);
  r.ttft_ms = ttft;
  r.tpot_ms = tpot;
  r.latency_ms = ttft + tpot * (tokens - 1);
  return r;
}

RequestResult Failed(absl::StatusCode code) {
  RequestResult r;
  r.code = code;
  r.error = "x";
  return r;
}

ConfigRun MakeRun(v1::SpeculationMethod method, int concurrency, double wall_s,
                  std::vector<RequestResult> results, std::vector<int> prompts) {
  ConfigRun run;
  run.key.method = method;
  run.key.concurrency = concurrency;
  run.wall_s = wall_s;
  run.results = std::move(results);
  run.prompt_index = std::move(prompts);
  return run;
}

TEST(AggregateTest, PoolsTokensAcceptanceAndLatencies) {
  ConfigRun run =
      MakeRun(v1::SPECULATION_METHOD_DRAFT, 2, 2.0,
              {Ok("a", 40, 40, 30, 10, 10, 5), Ok("b", 20, 20, 5, 10, 30, 7),
               Failed(absl::StatusCode::kDeadlineExceeded),
               Failed(absl::StatusCode::kDeadlineExceeded), Failed(absl::StatusCode::kUnavailable)},
              {0, 1, 2, 3, 4});
  ConfigResult r = Aggregate(run);
  EXPECT_EQ(r.requests, 5);
  EXPECT_EQ(r.ok, 2);
  EXPECT_EQ(r.errors["deadline_exceeded"], 2);
  EXPECT_EQ(r.errors["unavailable"], 1);
  EXPECT_EQ(r.generated_tokens, 60);
  EXPECT_DOUBLE_EQ(r.throughput_tok_s, 30.0);
  EXPECT_DOUBLE_EQ(r.requests_per_s, 1.0);
  // Pooled, not averaged per request: (30 + 5) / (40 + 20).
  EXPECT_DOUBLE_EQ(r.acceptance_rate, 35.0 / 60.0);
  // (40 + 20) tokens over (10 + 10) steps.
  EXPECT_DOUBLE_EQ(r.mean_accepted_length, 3.0);
  EXPECT_EQ(r.ttft_ms.count, 2);
  EXPECT_DOUBLE_EQ(r.ttft_ms.p50, 20.0);
  EXPECT_DOUBLE_EQ(r.tpot_ms.p90, 6.8);
}

TEST(AggregateTest, NoProposalsMeansNoAcceptanceRate) {
  ConfigResult r =
      Aggregate(MakeRun(v1::SPECULATION_METHOD_NONE, 1, 1.0, {Ok("a", 8, 0, 0, 8, 1, 1)}, {0}));
  EXPECT_TRUE(std::isnan(r.acceptance_rate));
  EXPECT_DOUBLE_EQ(r.mean_accepted_length, 1.0);
}

TEST(SpeedupTest, RatioToNoneAtTheSameConcurrency) {
  std::vector<ConfigResult> rows(5);
  auto set = [&rows](int i, v1::SpeculationMethod m, v1::Pipelining p, int c, double tput) {
    rows[i].key = {m, p, c};
    rows[i].throughput_tok_s = tput;
  };
  set(0, v1::SPECULATION_METHOD_NONE, v1::PIPELINING_ON, 1, 10);
  set(1, v1::SPECULATION_METHOD_NONE, v1::PIPELINING_ON, 4, 40);
  set(2, v1::SPECULATION_METHOD_DRAFT, v1::PIPELINING_ON, 1, 25);
  set(3, v1::SPECULATION_METHOD_DRAFT, v1::PIPELINING_OFF, 4, 30);  // No `none` with off.
  set(4, v1::SPECULATION_METHOD_DRAFT, v1::PIPELINING_ON, 8, 30);   // No `none` at 8.
  ComputeSpeedups(&rows);
  EXPECT_DOUBLE_EQ(rows[0].speedup_vs_none, 1.0);
  EXPECT_DOUBLE_EQ(rows[2].speedup_vs_none, 2.5);
  EXPECT_DOUBLE_EQ(rows[3].speedup_vs_none, 0.75);
  EXPECT_TRUE(std::isnan(rows[4].speedup_vs_none));
}

TEST(SpeedupTest, EachRoundAgainstItsOwnNoneWithCostTerms) {
  std::vector<ConfigResult> rows(4);
  for (int i = 0; i < 4; ++i) {
    rows[i].key = {i % 2 ? v1::SPECULATION_METHOD_DRAFT : v1::SPECULATION_METHOD_NONE,
                   v1::PIPELINING_DEFAULT, 1};
    rows[i].round = i / 2;
    rows[i].step_times.steps = 10;
    rows[i].step_times.verify_ms = i % 2 ? 3.0 : 2.0;
    rows[i].step_times.draft_ms = i % 2 ? 0.4 : 0;
    rows[i].step_times.overhead_ms = 0.2;
    rows[i].cost = AcceptanceTerms(i % 2 ? 20 : 0, 10, i % 2 ? 10 : 0, 10);
  }
  rows[0].throughput_tok_s = 10;  // Round 0.
  rows[1].throughput_tok_s = 30;
  rows[2].throughput_tok_s = 20;  // Round 1: the machine was faster.
  rows[3].throughput_tok_s = 30;
  ComputeSpeedups(&rows);
  EXPECT_DOUBLE_EQ(rows[1].speedup_vs_none, 3.0);
  EXPECT_DOUBLE_EQ(rows[3].speedup_vs_none, 1.5);
  EXPECT_EQ(NoneBaseline(rows, rows[3]), &rows[2]);
  EXPECT_DOUBLE_EQ(rows[1].cost.k_mean, 2.0);
  EXPECT_DOUBLE_EQ(rows[1].cost.verify_cost, 1.5);
  EXPECT_DOUBLE_EQ(rows[1].cost.draft_cost, 0.1);
  EXPECT_DOUBLE_EQ(rows[1].cost.overhead, 0.0);
  EXPECT_TRUE(std::isfinite(rows[1].cost.predicted_speedup));
  EXPECT_TRUE(std::isnan(rows[0].cost.predicted_speedup));  // `none` has no K.
}

TEST(SpeedupTest, PrefersTheNoneOfTheSameRule) {
  std::vector<ConfigResult> rows(3);
  rows[0].key = {v1::SPECULATION_METHOD_NONE, v1::PIPELINING_ON, 1, v1::ACCEPTANCE_RULE_REJECTION};
  rows[1].key = {v1::SPECULATION_METHOD_NONE, v1::PIPELINING_DEFAULT, 1,
                 v1::ACCEPTANCE_RULE_COUPLED};
  rows[2].key = {v1::SPECULATION_METHOD_DRAFT, v1::PIPELINING_ON, 1, v1::ACCEPTANCE_RULE_COUPLED};
  for (int i = 0; i < 3; ++i) rows[i].throughput_tok_s = 10.0 * (i + 1);
  ComputeSpeedups(&rows);
  EXPECT_EQ(NoneBaseline(rows, rows[2]), &rows[1]);  // The rule outranks the pipelining.
  EXPECT_DOUBLE_EQ(rows[2].speedup_vs_none, 1.5);    // 30 / 20.
}

TEST(SpeedupTest, AaControlIsComparedWithNoneOfItsRoundButNeverABaseline) {
  std::vector<ConfigResult> rows(7);
  const auto set = [&rows](int i, v1::SpeculationMethod m, bool control, int c, int round,
                           double tok_s) {
    rows[i].key = {m, v1::PIPELINING_DEFAULT, c, v1::ACCEPTANCE_RULE_DEFAULT, control};
    rows[i].round = round;
    rows[i].throughput_tok_s = tok_s;
  };
  // The control comes first in each round, so a baseline search that took it would
  // pick it over `none` (same rule, same pipelining).
  set(0, v1::SPECULATION_METHOD_NONE, true, 1, 0, 12);
  set(1, v1::SPECULATION_METHOD_NONE, false, 1, 0, 10);
  set(2, v1::SPECULATION_METHOD_DRAFT, false, 1, 0, 25);
  set(3, v1::SPECULATION_METHOD_NONE, true, 1, 1, 18);
  set(4, v1::SPECULATION_METHOD_NONE, false, 1, 1, 20);
  set(5, v1::SPECULATION_METHOD_DRAFT, false, 1, 1, 30);
  set(6, v1::SPECULATION_METHOD_NONE, true, 4, 1, 40);  // No `none` at 4.
  ComputeSpeedups(&rows);
  EXPECT_EQ(NoneBaseline(rows, rows[0]), &rows[1]);  // Not itself.
  EXPECT_EQ(NoneBaseline(rows, rows[2]), &rows[1]);
  EXPECT_EQ(NoneBaseline(rows, rows[5]), &rows[4]);
  EXPECT_DOUBLE_EQ(rows[0].speedup_vs_none, 1.2);  // 12 / 10, round 0.
  EXPECT_DOUBLE_EQ(rows[3].speedup_vs_none, 0.9);  // 18 / 20, round 1.
  EXPECT_DOUBLE_EQ(rows[1].speedup_vs_none, 1.0);
  EXPECT_DOUBLE_EQ(rows[2].speedup_vs_none, 2.5);
  EXPECT_DOUBLE_EQ(rows[5].speedup_vs_none, 1.5);
  EXPECT_EQ(NoneBaseline(rows, rows[6]), nullptr);
  EXPECT_TRUE(std::isnan(rows[6].speedup_vs_none));
}

bool All(const ConfigKey&) { return true; }

TEST(OutputCheckTest, EveryMethodMustReproduceNone) {
  std::vector<ConfigRun> runs;
  runs.push_back(MakeRun(v1::SPECULATION_METHOD_NONE, 1, 1,
                         {Ok("alpha", 1, 0, 0, 1, 1, 1), Ok("beta", 1, 0, 0, 1, 1, 1)}, {0, 1}));
  runs.push_back(MakeRun(v1::SPECULATION_METHOD_DRAFT, 2, 1,
                         {Ok("alpha", 1, 1, 1, 1, 1, 1), Ok("beta", 1, 1, 1, 1, 1, 1),
                          Ok("alpha", 1, 1, 1, 1, 1, 1), Failed(absl::StatusCode::kInternal)},
                         {0, 1, 0, 1}));
  OutputCheck good = CheckOutputsAgainstNone(runs, All);
  EXPECT_EQ(good.compared, 3);
  EXPECT_TRUE(good.ok());

  runs.push_back(
      MakeRun(v1::SPECULATION_METHOD_PROMPT_LOOKUP, 1, 1, {Ok("betx", 1, 1, 1, 1, 1, 1)}, {1}));
  OutputCheck bad = CheckOutputsAgainstNone(runs, All);
  EXPECT_EQ(bad.compared, 4);
  ASSERT_EQ(bad.mismatches.size(), 1u);
  EXPECT_THAT(bad.mismatches[0], HasSubstr("prompt_lookup"));
  EXPECT_THAT(bad.mismatches[0], HasSubstr("prompt 1"));
  EXPECT_THAT(bad.mismatches[0], HasSubstr("byte 3"));
  EXPECT_FALSE(bad.ok());
  nlohmann::json j = ToJson(bad);
  EXPECT_EQ(j["mismatched"], 1);
  EXPECT_EQ(j["ok"], false);
}

TEST(OutputCheckTest, AaControlIsCheckedButNeverTheReference) {
  std::vector<ConfigRun> runs;
  // An odd round runs the control before `none`; its outputs must still be checked
  // against `none`'s, not serve as the reference.
  runs.push_back(MakeRun(v1::SPECULATION_METHOD_NONE, 1, 1, {Ok("alphx", 1, 0, 0, 1, 1, 1)}, {0}));
  runs.back().key.aa_control = true;
  runs.push_back(MakeRun(v1::SPECULATION_METHOD_NONE, 1, 1, {Ok("alpha", 1, 0, 0, 1, 1, 1)}, {0}));
  OutputCheck check = CheckOutputsAgainstNone(runs, All);
  EXPECT_EQ(check.compared, 1);
  ASSERT_EQ(check.mismatches.size(), 1u);
  EXPECT_THAT(check.mismatches[0], HasSubstr("none (A/A) rule=default"));
  EXPECT_THAT(check.mismatches[0], HasSubstr("none \"alpha\" vs \"alphx\""));
  runs[0].results[0].text = "alpha";
  check = CheckOutputsAgainstNone(runs, All);
  EXPECT_EQ(check.compared, 1);
  EXPECT_TRUE(check.ok());
  // A control alone has no reference.
  EXPECT_EQ(CheckOutputsAgainstNone({runs[0]}, All).compared, 0);
}

TEST(OutputCheckTest, NothingToCompareIsNotOk) {
  std::vector<ConfigRun> runs;
  runs.push_back(MakeRun(v1::SPECULATION_METHOD_DRAFT, 1, 1, {Ok("a", 1, 1, 1, 1, 1, 1)}, {0}));
  EXPECT_FALSE(CheckOutputsAgainstNone(runs, All).ok());
}

TEST(OutputCheckTest, OnlyComparableRulesTakePart) {
  std::vector<ConfigRun> runs;
  runs.push_back(MakeRun(v1::SPECULATION_METHOD_NONE, 1, 1, {Ok("alpha", 1, 0, 0, 1, 1, 1)}, {0}));
  runs.back().key.rule = v1::ACCEPTANCE_RULE_REJECTION;  // Seeded inverse-CDF sampling.
  runs.push_back(MakeRun(v1::SPECULATION_METHOD_NONE, 1, 1, {Ok("gamma", 1, 0, 0, 1, 1, 1)}, {0}));
  runs.back().key.rule = v1::ACCEPTANCE_RULE_COUPLED;
  runs.push_back(MakeRun(v1::SPECULATION_METHOD_DRAFT, 1, 1, {Ok("gamma", 1, 1, 1, 1, 1, 1)}, {0}));
  runs.back().key.rule = v1::ACCEPTANCE_RULE_COUPLED;
  runs.push_back(MakeRun(v1::SPECULATION_METHOD_DRAFT, 1, 1, {Ok("delta", 1, 1, 1, 1, 1, 1)}, {0}));
  runs.back().key.rule = v1::ACCEPTANCE_RULE_REJECTION;
  const auto coupled = [](const ConfigKey& k) { return k.rule == v1::ACCEPTANCE_RULE_COUPLED; };
  OutputCheck check = CheckOutputsAgainstNone(runs, coupled);
  EXPECT_EQ(check.compared, 1);
  EXPECT_TRUE(check.ok());
  EXPECT_FALSE(CheckOutputsAgainstNone(runs, All).ok());
  EXPECT_THAT(CheckOutputsAgainstNone(runs, All).mismatches[0], HasSubstr("none rule=coupled"));
}

TEST(BusyBetweenTest, UsesTheGrowthOfStepLatencySums) {
  auto before = ParsePrometheusText(
      "tandem_step_latency_ms_sum{phase=\"draft\"} 1000\n"
      "tandem_step_latency_ms_sum{phase=\"verify\"} 5000\n"
      "tandem_step_latency_ms_sum{phase=\"collective\"} 100\n"
      "tandem_draft_busy_fraction 0.9\n");
  auto after = ParsePrometheusText(
      "tandem_step_latency_ms_sum{phase=\"draft\"} 1500\n"
      "tandem_step_latency_ms_sum{phase=\"verify\"} 6200\n"
      "tandem_step_latency_ms_sum{phase=\"collective\"} 400\n"
      "tandem_draft_busy_fraction 0.8\n");
  ASSERT_TRUE(before.ok() && after.ok());
  BusyFractions busy = BusyBetween(*before, *after, 2.0);
  EXPECT_DOUBLE_EQ(busy.draft, 0.25);   // 500 ms of 2000.
  EXPECT_DOUBLE_EQ(busy.target, 0.75);  // 1200 + 300 ms of 2000.
  EXPECT_THAT(busy.source, HasSubstr("step time"));
}

TEST(BusyBetweenTest, FallsBackToGaugesThenToNothing) {
  auto gauges =
      ParsePrometheusText("tandem_draft_busy_fraction 0.4\ntandem_target_busy_fraction 0.6\n");
  ASSERT_TRUE(gauges.ok());
  BusyFractions busy = BusyBetween({}, *gauges, 1.0);
  EXPECT_DOUBLE_EQ(busy.draft, 0.4);
  EXPECT_DOUBLE_EQ(busy.target, 0.6);
  EXPECT_THAT(busy.source, HasSubstr("gauges"));
  BusyFractions none = BusyBetween({}, {}, 1.0);
  EXPECT_TRUE(std::isnan(none.draft));
  EXPECT_EQ(none.source, "");
}

TEST(ToJsonTest, RowWithSpeedupRoundAndCostTerms) {
  std::vector<ConfigResult> rows(2);
  rows[0].key = {v1::SPECULATION_METHOD_NONE, v1::PIPELINING_DEFAULT, 1};
  rows[0].throughput_tok_s = 10;
  rows[1].key = {v1::SPECULATION_METHOD_DRAFT, v1::PIPELINING_ON, 1};
  rows[1].throughput_tok_s = 21;
  rows[1].acceptance_rate = 0.5;
  ComputeSpeedups(&rows);
  nlohmann::json j = ToJson(rows[1]);
  EXPECT_EQ(j["method"], "draft");
  EXPECT_EQ(j["rule"], "default");
  EXPECT_EQ(j["pipelining"], "on");
  EXPECT_EQ(j["round"], 0);
  EXPECT_DOUBLE_EQ(j["speedup_vs_none"].get<double>(), 2.1);
  EXPECT_TRUE(j["draft_busy"].is_null());
  EXPECT_TRUE(j["ttft_ms"]["p50"].is_null());
  EXPECT_TRUE(j["cost_terms"]["nu"].is_null());  // No metrics.
  EXPECT_TRUE(j["step_times"].contains("verify_ms"));
  EXPECT_EQ(j["aa_control"], false);
  EXPECT_EQ(j["label"], "draft");
  rows[0].key.aa_control = true;
  EXPECT_EQ(ToJson(rows[0])["aa_control"], true);
  EXPECT_EQ(ToJson(rows[0])["label"], "none (A/A)");
  EXPECT_EQ(ToJson(rows[0])["method"], "none");
}

TEST(AggregateTest, AcceptanceTermsFromSpeculativeSteps) {
  RequestResult a = Ok("a", 30, 40, 15, 12, 1, 1);
  a.stats.set_speculative_steps(10);
  a.stats.set_tree_steps(4);
  ConfigResult r = Aggregate(MakeRun(v1::SPECULATION_METHOD_DRAFT, 1, 1.0, {a}, {0}));
  EXPECT_DOUBLE_EQ(r.cost.k_mean, 4.0);
  EXPECT_DOUBLE_EQ(r.cost.alpha, AcceptanceFromAcceptedPerStep(1.5, 4));
  EXPECT_DOUBLE_EQ(r.cost.speculative_share, 10.0 / 12.0);  // 12 target steps.
  EXPECT_DOUBLE_EQ(r.tree_share, 0.4);
  EXPECT_DOUBLE_EQ(ToJson(r)["tree_step_share"].get<double>(), 0.4);
}

TEST(AggregateTest, ControllerPredictionAndOffStepsFromTheStats) {
  RequestResult a = Ok("a", 30, 40, 15, 12, 1, 1);  // 12 target steps.
  a.stats.set_predicted_speedup(2.0f);
  (*a.stats.mutable_speculation_off_steps())["controller"] = 3;
  RequestResult b = Ok("b", 30, 40, 15, 12, 1, 1);
  b.stats.set_predicted_speedup(1.0f);
  (*b.stats.mutable_speculation_off_steps())["controller"] = 1;
  (*b.stats.mutable_speculation_off_steps())["not_requested"] = 5;  // Not "off".
  for (int n : {4, 0, 8}) a.stats.add_steps_by_k(n);
  for (int n : {1, 2}) b.stats.add_steps_by_k(n);
  RequestResult fixed_k = Ok("c", 30, 40, 15, 12, 1, 1);  // No prediction.
  ConfigResult r =
      Aggregate(MakeRun(v1::SPECULATION_METHOD_AUTO, 1, 1.0, {a, b, fixed_k}, {0, 1, 2}));
  EXPECT_DOUBLE_EQ(r.controller_speedup, 1.5);  // (2 * 12 + 1 * 12) / 24.
  EXPECT_EQ(r.off_steps["controller"], 4);
  EXPECT_DOUBLE_EQ(r.off_share, 4.0 / 36.0);
  const nlohmann::json j = ToJson(r);
  EXPECT_DOUBLE_EQ(j["controller_predicted_speedup"].get<double>(), 1.5);
  EXPECT_EQ(j["speculation_off_steps"]["not_requested"], 5);
  EXPECT_EQ(r.steps_by_k, (std::vector<long long>{5, 2, 8}));
  EXPECT_EQ(j["steps_by_k"], nlohmann::json({5, 2, 8}));
}

}  // namespace
}  // namespace tandem::client
