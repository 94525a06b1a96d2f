#include "client/prometheus_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace tandem::client {
namespace {

constexpr char kExposition[] = R"(# HELP tandem_draft_busy_fraction Fraction of recent wall time.
# TYPE tandem_draft_busy_fraction gauge
tandem_draft_busy_fraction 0.25
tandem_target_busy_fraction 7.5e-01

# TYPE tandem_step_latency_ms histogram
tandem_step_latency_ms_count{phase="draft"} 12
tandem_step_latency_ms_sum{phase="draft"} 340.5
tandem_step_latency_ms_bucket{phase="verify",le="+Inf"} 3
tandem_step_latency_ms_sum{phase="verify"} 1000 1700000000000
tandem_requests_total{status="ok",note="a \"quoted\", comma\\ and\nnewline"} 4
)";

TEST(PrometheusTextTest, ParsesGaugesHistogramsAndLabels) {
  auto samples = ParsePrometheusText(kExposition);
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(samples->size(), 7u);
  EXPECT_EQ(FindSample(*samples, "tandem_draft_busy_fraction"), 0.25);
  EXPECT_EQ(FindSample(*samples, "tandem_target_busy_fraction"), 0.75);
  EXPECT_EQ(FindSample(*samples, "tandem_step_latency_ms_sum", {{"phase", "draft"}}), 340.5);
  EXPECT_EQ(FindSample(*samples, "tandem_step_latency_ms_sum", {{"phase", "verify"}}), 1000);
  EXPECT_EQ(FindSample(*samples, "tandem_step_latency_ms_bucket", {{"le", "+Inf"}}), 3);
  EXPECT_EQ(FindSample(*samples, "tandem_step_latency_ms_sum", {{"phase", "rpc"}}), std::nullopt);
  EXPECT_EQ(FindSample(*samples, "missing"), std::nullopt);
  const auto& last = samples->back();
  EXPECT_EQ(last.labels.at("note"), "a \"quoted\", comma\\ and\nnewline");
  EXPECT_EQ(last.value, 4);
}

TEST(PrometheusTextTest, SpecialValues) {
  auto samples = ParsePrometheusText("a +Inf\nb NaN\nc -Inf\n");
  ASSERT_TRUE(samples.ok());
  EXPECT_TRUE(std::isinf((*samples)[0].value));
  EXPECT_TRUE(std::isnan((*samples)[1].value));
  EXPECT_LT((*samples)[2].value, 0);
}

TEST(PrometheusTextTest, MalformedLinesNameTheLine) {
  for (const char* bad :
       {"x\nname{a=\"1\" 2", "name", "name abc", "{a=\"b\"} 1", "n{a=b} 1", "n 1 2 3"}) {
    auto samples = ParsePrometheusText(bad);
    EXPECT_FALSE(samples.ok()) << bad;
  }
  auto second = ParsePrometheusText("ok 1\nbroken");
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), ::testing::HasSubstr("line 2"));
}

TEST(AddGrowthTest, CountersAddOverIntervalsGaugesTakeTheLastValue) {
  const std::map<std::string, std::string> verify = {{"phase", "verify"}};
  const std::vector<PrometheusSample> t0 = {{"tandem_step_latency_ms_sum", verify, 100},
                                            {"tandem_draft_busy_fraction", {}, 0.5}};
  const std::vector<PrometheusSample> t1 = {{"tandem_step_latency_ms_sum", verify, 130},
                                            {"tandem_draft_busy_fraction", {}, 0.2}};
  const std::vector<PrometheusSample> t2 = {{"tandem_step_latency_ms_sum", verify, 150},
                                            {"tandem_step_latency_ms_count", verify, 4},
                                            {"tandem_draft_busy_fraction", {}, 0.3}};
  const std::vector<PrometheusSample> t3 = {{"tandem_step_latency_ms_sum", verify, 175},
                                            {"tandem_step_latency_ms_count", verify, 9},
                                            {"tandem_draft_busy_fraction", {}, 0.4}};
  std::vector<PrometheusSample> total;
  AddGrowth(t0, t1, &total);  // +30
  AddGrowth(t2, t3, &total);  // +25 (what ran between t1 and t2 is not counted); count +5
  EXPECT_EQ(FindSample(total, "tandem_step_latency_ms_sum", verify), 55);
  EXPECT_EQ(FindSample(total, "tandem_step_latency_ms_count", verify), 5);
  EXPECT_EQ(FindSample(total, "tandem_draft_busy_fraction"), 0.4);
  // A counter absent before the interval grew from 0.
  std::vector<PrometheusSample> fresh;
  AddGrowth({}, t1, &fresh);
  EXPECT_EQ(FindSample(fresh, "tandem_step_latency_ms_sum", verify), 130);
}

}  // namespace
}  // namespace tandem::client
