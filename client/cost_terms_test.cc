#include "client/cost_terms.h"

#include <gtest/gtest.h>

#include <cmath>

#include "spec/cost_model.h"

namespace tandem::client {
namespace {

std::vector<PrometheusSample> Scrape(const std::string& text) {
  auto samples = ParsePrometheusText(text);
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *samples : std::vector<PrometheusSample>{};
}

TEST(AcceptanceFromAcceptedPerStepTest, InvertsTheModel) {
  for (double alpha : {0.1, 0.5, 0.8, 0.95}) {
    for (int k : {1, 3, 8}) {
      const double accepted = spec::ExpectedTokensPerStep(alpha, k) - 1;
      EXPECT_NEAR(AcceptanceFromAcceptedPerStep(accepted, k), alpha, 1e-9) << alpha << " " << k;
    }
  }
  EXPECT_EQ(AcceptanceFromAcceptedPerStep(0, 4), 0);
  EXPECT_EQ(AcceptanceFromAcceptedPerStep(4, 4), 1);
  EXPECT_EQ(AcceptanceFromAcceptedPerStep(5, 4), 1);
  EXPECT_TRUE(std::isnan(AcceptanceFromAcceptedPerStep(1, 0)));
  EXPECT_TRUE(std::isnan(AcceptanceFromAcceptedPerStep(NAN, 2)));
}

TEST(AcceptanceTermsTest, KMeanAndAlphaFromPooledCounts) {
  // 10 speculative steps, 40 proposals (K = 4), 15 accepted: 1.5 per step.
  CostTerms t = AcceptanceTerms(40, 15, 10, 10);
  EXPECT_DOUBLE_EQ(t.k_mean, 4.0);
  EXPECT_NEAR(spec::ExpectedTokensPerStep(t.alpha, 4), 2.5, 1e-9);
  // Below accepted / proposed would say: 0.375 per proposal understates alpha.
  EXPECT_GT(t.alpha, 15.0 / 40.0);
  EXPECT_NEAR(t.expected_tokens, 2.5, 1e-9);  // Needs no step times.
  EXPECT_TRUE(std::isnan(t.draft_cost));
  EXPECT_TRUE(std::isnan(AcceptanceTerms(0, 0, 0, 5).alpha));
}

TEST(StepTimesBetweenTest, MeansPerVerifyStepFromHistogramGrowth) {
  auto before = Scrape(
      "tandem_step_latency_ms_sum{phase=\"verify\"} 100\n"
      "tandem_step_latency_ms_count{phase=\"verify\"} 10\n"
      "tandem_step_latency_ms_sum{phase=\"rpc\"} 10\n"
      "tandem_step_latency_ms_count{phase=\"rpc\"} 10\n"
      "tandem_step_latency_ms_sum{phase=\"draft\"} 0\n"
      "tandem_step_latency_ms_count{phase=\"draft\"} 0\n"
      "tandem_step_latency_ms_sum{phase=\"overhead\"} 5\n"
      "tandem_step_latency_ms_count{phase=\"overhead\"} 20\n");
  auto after = Scrape(
      "tandem_step_latency_ms_sum{phase=\"verify\"} 300\n"
      "tandem_step_latency_ms_count{phase=\"verify\"} 60\n"
      "tandem_step_latency_ms_sum{phase=\"rpc\"} 60\n"
      "tandem_step_latency_ms_count{phase=\"rpc\"} 60\n"
      "tandem_step_latency_ms_sum{phase=\"draft\"} 25\n"
      "tandem_step_latency_ms_count{phase=\"draft\"} 50\n"
      "tandem_step_latency_ms_sum{phase=\"overhead\"} 30\n"
      "tandem_step_latency_ms_count{phase=\"overhead\"} 120\n");
  StepTimes t = StepTimesBetween(before, after);
  EXPECT_DOUBLE_EQ(t.steps, 50);
  EXPECT_DOUBLE_EQ(t.verify_ms, (200.0 + 50.0) / 50);
  EXPECT_DOUBLE_EQ(t.draft_ms, 25.0 / 50);
  EXPECT_DOUBLE_EQ(t.overhead_ms, 25.0 / 50);
  EXPECT_EQ(StepTimesBetween({}, {}).steps, 0);
  EXPECT_TRUE(std::isnan(StepTimesBetween({}, {}).verify_ms));
}

TEST(AddTimeTermsTest, TermsRelativeToThePlainStepAndThePrediction) {
  StepTimes none;
  none.steps = 100;
  none.verify_ms = 2.0;
  none.draft_ms = 0;
  none.overhead_ms = 0.1;
  StepTimes row;
  row.steps = 40;
  row.verify_ms = 2.4;    // nu = 1.2
  row.draft_ms = 0.8;     // 0.2 ms per token at K = 4: c = 0.1
  row.overhead_ms = 0.3;  // 0.2 ms more than `none`: o = 0.1
  CostTerms t = AcceptanceTerms(40, 15, 10, 10);
  AddTimeTerms(row, none, &t);
  EXPECT_DOUBLE_EQ(t.draft_cost, 0.1);
  EXPECT_DOUBLE_EQ(t.verify_cost, 1.2);
  EXPECT_NEAR(t.overhead, 0.1, 1e-12);
  EXPECT_NEAR(t.expected_tokens, 2.5, 1e-9);
  EXPECT_NEAR(t.predicted_speedup, 2.5 / (4 * 0.1 + 1.2 + 0.1), 1e-9);
  EXPECT_DOUBLE_EQ(t.predicted_speedup,
                   spec::SequentialSpeedup(t.alpha, 4, t.draft_cost, t.verify_cost, t.overhead));

  CostTerms no_metrics = AcceptanceTerms(40, 15, 10, 10);
  AddTimeTerms(row, StepTimes(), &no_metrics);
  EXPECT_TRUE(std::isnan(no_metrics.verify_cost));
  EXPECT_TRUE(std::isnan(no_metrics.predicted_speedup));
  EXPECT_FALSE(std::isnan(no_metrics.alpha));
}

TEST(AddTimeTermsTest, PlainStepsOfAProposerWithoutCandidatesAreMixedIn) {
  // Half of the 20 target steps speculated (prompt lookup without a match on the rest).
  CostTerms t = AcceptanceTerms(40, 15, 10, 20);
  EXPECT_DOUBLE_EQ(t.speculative_share, 0.5);
  EXPECT_NEAR(t.expected_tokens, 2.5, 1e-9);  // Per speculative step.
  StepTimes none, row;
  none.steps = row.steps = 20;
  none.verify_ms = 2.0;
  none.overhead_ms = row.overhead_ms = 0.1;
  row.verify_ms = 2.2;  // Averaged over all 20 steps: nu = 1.1.
  row.draft_ms = 0.4;   // Per verify step: 0.8 ms per drafting step, K = 4: c = 0.1.
  AddTimeTerms(row, none, &t);
  EXPECT_NEAR(t.draft_cost, 0.1, 1e-12);
  EXPECT_NEAR(t.verify_cost, 1.1, 1e-12);
  EXPECT_NEAR(t.overhead, 0.0, 1e-12);
  // (f E + 1 - f) tokens per step over (f K c + nu + o): 1.75 / 1.3.
  EXPECT_NEAR(t.predicted_speedup, 1.75 / 1.3, 1e-9);
}

}  // namespace
}  // namespace tandem::client
