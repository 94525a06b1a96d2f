#include "coordinator/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

using ::testing::HasSubstr;
namespace v1 = tandem::v1;

// Minimal HTTP/1.0 GET over a raw socket; returns the whole response ("" on failure).
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) response.append(buf, n);
    }
  }
  close(fd);
  return response;
}

// Parses a text exposition into "name{labels}" -> value.
std::map<std::string, double> ParseExposition(const std::string& text) {
  std::map<std::string, double> series;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    series[std::string(line.substr(0, space))] =
        std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
  }
  return series;
}

double Get(const std::map<std::string, double>& series, const std::string& key) {
  auto it = series.find(key);
  EXPECT_NE(it, series.end()) << "missing series " << key;
  return it == series.end() ? std::nan("") : it->second;
}

TEST(CoordinatorMetricsTest, ServesRecordedValuesOverHttp) {
  absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> created =
      CoordinatorMetrics::Create({"127.0.0.1:0", 6});
  ASSERT_TRUE(created.ok()) << created.status();
  CoordinatorMetrics& m = **created;
  ASSERT_GT(m.port(), 0);

  m.RecordRequest(absl::StatusCode::kOk);
  m.RecordRequest(absl::StatusCode::kOk);
  m.RecordRequest(absl::StatusCode::kInvalidArgument);
  m.RecordRequest(absl::StatusCode::kResourceExhausted);

  const CoordinatorMetrics::StepRecord steps[] = {
      {v1::SPECULATION_METHOD_DRAFT, 4, 2, 3},         {v1::SPECULATION_METHOD_DRAFT, 4, 4, 5},
      {v1::SPECULATION_METHOD_PROMPT_LOOKUP, 3, 0, 1}, {v1::SPECULATION_METHOD_NONE, 0, 0, 1},
      {v1::SPECULATION_METHOD_DRAFT, 8, 7, 6},  // K above the 6 tracked positions.
  };
  for (const auto& step : steps) m.RecordStep(step);
  m.RecordFallbackSteps("draft_down", 2);
  m.RecordFallbackSteps("draft_down");
  m.RecordFallbackSteps("batch_limit", 0);  // Nothing recorded.
  m.RecordControllerStep("speculate", 4, 1.8);
  m.RecordControllerStep("speculate", 2, 1.3);
  m.RecordControllerStep("controller", 0, 1.0);
  m.RecordControllerStep("probe", 1, 0.9);
  m.RecordControllerStep("batch_limit", 0, std::nullopt);  // Not the controller's choice.
  m.RecordPhaseMode("ping_pong", 0.25);
  m.RecordPhaseMode("ping_pong", 0.3);
  m.RecordPhaseMode("sequential", std::numeric_limits<double>::infinity());  // Gauge kept.
  m.RecordSpeculationCacheLookup(true, 3);
  m.RecordSpeculationCacheLookup(false, 3);
  m.RecordSpeculationCacheLookup(false, 1);
  m.SetSlowdowns(1.4, 1.1, 1.3, 1.0);
  m.SetSlowdowns(std::numeric_limits<double>::quiet_NaN(), 1.2, 1.25, 1.05, 0.9);  // Verify kept.

  CoordinatorMetrics::StepLatency latency;
  latency.draft_ms = 1.5;
  latency.verify_ms = 12.0;
  latency.rpc_ms = 0.3;
  latency.overhead_ms = 0.2;
  m.RecordStepLatency(latency);
  m.RecordTimeToFirstToken(250.0);
  m.RecordTimePerOutputToken(std::numeric_limits<double>::quiet_NaN());  // Dropped.
  m.RecordTimePerOutputToken(15.0);
  m.RecordQueueTime(3.0);

  m.SetQueueDepth(5);
  m.SetRunningSequences(3);
  m.SetKvBlocks("target", 10, 100);
  m.SetKvBlocks("draft", 7, 50);
  m.SetDraftAvailable(true);
  m.SetBusyFractions(0.4, 1.7);  // Target clamped to 1.

  const std::string response = HttpGet(m.port(), "/metrics");
  ASSERT_THAT(response, HasSubstr("200 OK"));
  const size_t body_start = response.find("\r\n\r\n");
  ASSERT_NE(body_start, std::string::npos);
  const std::string body = response.substr(body_start + 4);
  EXPECT_THAT(body, HasSubstr("# TYPE tandem_accepted_length histogram"));
  EXPECT_THAT(body, HasSubstr("# TYPE tandem_requests_total counter"));
  const std::map<std::string, double> s = ParseExposition(body);

  EXPECT_EQ(Get(s, "tandem_requests_total{status=\"ok\"}"), 2);
  EXPECT_EQ(Get(s, "tandem_requests_total{status=\"invalid_argument\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_requests_total{status=\"resource_exhausted\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_requests_total{status=\"unavailable\"}"), 0);

  // Expected totals computed from the inputs.
  double proposed = 0, accepted = 0, generated = 0;
  std::map<int, double> pos_proposed, pos_accepted;
  for (const auto& step : steps) {
    proposed += step.proposed;
    accepted += step.accepted;
    generated += step.generated_tokens;
    for (int i = 1; i <= 6; ++i) {
      pos_proposed[i] += step.proposed >= i;
      pos_accepted[i] += step.accepted >= i;
    }
  }
  EXPECT_EQ(Get(s, "tandem_draft_tokens_proposed_total"), proposed);
  EXPECT_EQ(Get(s, "tandem_draft_tokens_accepted_total"), accepted);
  EXPECT_EQ(Get(s, "tandem_generated_tokens_total"), generated);
  for (int i = 1; i <= 6; ++i) {
    const std::string label = "{position=\"" + std::to_string(i) + "\"}";
    EXPECT_EQ(Get(s, "tandem_position_proposed_total" + label), pos_proposed[i]) << i;
    EXPECT_EQ(Get(s, "tandem_position_accepted_total" + label), pos_accepted[i]) << i;
  }
  EXPECT_EQ(s.count("tandem_position_proposed_total{position=\"7\"}"), 0u);
  EXPECT_EQ(Get(s, "tandem_speculation_steps_total{method=\"draft\"}"), 3);
  EXPECT_EQ(Get(s, "tandem_speculation_steps_total{method=\"prompt_lookup\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_speculation_steps_total{method=\"none\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_speculation_steps_total{method=\"medusa\"}"), 0);
  EXPECT_EQ(Get(s, "tandem_fallback_steps_total{reason=\"draft_down\"}"), 3);
  EXPECT_EQ(s.count("tandem_fallback_steps_total{reason=\"batch_limit\"}"), 0u);

  EXPECT_EQ(Get(s, "tandem_controller_steps_total{decision=\"speculate\"}"), 2);
  EXPECT_EQ(Get(s, "tandem_controller_steps_total{decision=\"controller\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_controller_steps_total{decision=\"probe\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_controller_steps_total{decision=\"batch_limit\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_controller_k_count"), 5);
  EXPECT_EQ(Get(s, "tandem_controller_k_sum"), 4 + 2 + 1);
  EXPECT_EQ(Get(s, "tandem_controller_k_bucket{le=\"0\"}"), 2);
  EXPECT_EQ(Get(s, "tandem_controller_predicted_speedup_count"), 4);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_controller_predicted_speedup_sum"), 1.8 + 1.3 + 1.0 + 0.9);
  EXPECT_EQ(Get(s, "tandem_controller_predicted_speedup_bucket{le=\"1\"}"), 2);

  EXPECT_EQ(Get(s, "tandem_phase_mode_total{mode=\"ping_pong\"}"), 2);
  EXPECT_EQ(Get(s, "tandem_phase_mode_total{mode=\"sequential\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_phase_mode_total{mode=\"lockstep\"}"), 0);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_pipeline_predicted_gain"), 0.3);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_overlap_slowdown{worker=\"target\"}"), 1.4);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_overlap_slowdown{worker=\"draft\"}"), 1.2);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_speculation_cost_factor{proposers=\"draft_worker\"}"), 1.25);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_speculation_cost_factor{proposers=\"other\"}"), 1.05);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_speculation_cost_factor{proposers=\"draft_tree\"}"), 0.9);
  EXPECT_EQ(Get(s, "tandem_speculation_cache_lookups_total{result=\"hit\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_speculation_cache_lookups_total{result=\"miss\"}"), 2);
  EXPECT_EQ(Get(s, "tandem_speculation_cache_branches_total"), 7);

  // Accepted lengths observed: 2, 4, 0, 7 (the plain step is not speculative).
  EXPECT_EQ(Get(s, "tandem_accepted_length_count"), 4);
  EXPECT_EQ(Get(s, "tandem_accepted_length_sum"), 13);
  EXPECT_EQ(Get(s, "tandem_accepted_length_bucket{le=\"0\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_accepted_length_bucket{le=\"1\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_accepted_length_bucket{le=\"2\"}"), 2);
  EXPECT_EQ(Get(s, "tandem_accepted_length_bucket{le=\"4\"}"), 3);
  EXPECT_EQ(Get(s, "tandem_accepted_length_bucket{le=\"7\"}"), 4);
  EXPECT_EQ(Get(s, "tandem_accepted_length_bucket{le=\"16\"}"), 4);
  EXPECT_EQ(Get(s, "tandem_accepted_length_bucket{le=\"+Inf\"}"), 4);

  EXPECT_EQ(Get(s, "tandem_step_latency_ms_count{phase=\"draft\"}"), 1);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_step_latency_ms_sum{phase=\"draft\"}"), 1.5);
  EXPECT_EQ(Get(s, "tandem_step_latency_ms_bucket{phase=\"draft\",le=\"1\"}"), 0);
  EXPECT_EQ(Get(s, "tandem_step_latency_ms_bucket{phase=\"draft\",le=\"2\"}"), 1);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_step_latency_ms_sum{phase=\"verify\"}"), 12.0);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_step_latency_ms_sum{phase=\"rpc\"}"), 0.3);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_step_latency_ms_sum{phase=\"overhead\"}"), 0.2);
  EXPECT_EQ(Get(s, "tandem_step_latency_ms_count{phase=\"collective\"}"), 0);
  EXPECT_EQ(Get(s, "tandem_time_to_first_token_ms_count"), 1);
  EXPECT_EQ(Get(s, "tandem_time_to_first_token_ms_bucket{le=\"200\"}"), 0);
  EXPECT_EQ(Get(s, "tandem_time_to_first_token_ms_bucket{le=\"500\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_time_per_output_token_ms_count"), 1);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_time_per_output_token_ms_sum"), 15.0);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_queue_time_ms_sum"), 3.0);

  EXPECT_EQ(Get(s, "tandem_queue_depth"), 5);
  EXPECT_EQ(Get(s, "tandem_running_sequences"), 3);
  EXPECT_EQ(Get(s, "tandem_kv_blocks_used{worker=\"target\"}"), 10);
  EXPECT_EQ(Get(s, "tandem_kv_blocks_total{worker=\"target\"}"), 100);
  EXPECT_EQ(Get(s, "tandem_kv_blocks_used{worker=\"draft\"}"), 7);
  EXPECT_EQ(Get(s, "tandem_draft_available"), 1);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_draft_busy_fraction"), 0.4);
  EXPECT_DOUBLE_EQ(Get(s, "tandem_target_busy_fraction"), 1.0);

  // Gauges follow later updates; Serialize() agrees with the HTTP endpoint.
  m.SetDraftAvailable(false);
  m.SetKvBlocks("target", 12, 100);
  const std::map<std::string, double> later = ParseExposition(m.Serialize());
  EXPECT_EQ(Get(later, "tandem_draft_available"), 0);
  EXPECT_EQ(Get(later, "tandem_kv_blocks_used{worker=\"target\"}"), 12);
  EXPECT_EQ(Get(later, "tandem_requests_total{status=\"ok\"}"), 2);
}

// Shutdown is prompt: the HTTP listener stops without waiting out the embedded
// server's 2 s poll quantum (a coordinator's SIGTERM exit waits for this).
TEST(CoordinatorMetricsTest, StopsTheListenerPromptly) {
  for (const char* address : {"127.0.0.1:0", "0.0.0.0:0"}) {
    absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> created =
        CoordinatorMetrics::Create({address, 6});
    ASSERT_TRUE(created.ok()) << created.status();
    const int port = (*created)->port();
    ASSERT_THAT(HttpGet(port, "/metrics"), HasSubstr("200 OK"));
    const absl::Time start = absl::Now();
    created->reset();
    const absl::Duration took = absl::Now() - start;
    std::printf("%s: metrics listener stopped in %s\n", address,
                absl::FormatDuration(took).c_str());
    EXPECT_LT(took, absl::Seconds(1)) << address;
    EXPECT_EQ(HttpGet(port, "/metrics"), "") << "still serving on " << port;
  }
}

TEST(CoordinatorMetricsTest, ClampsBadInputs) {
  absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> created = CoordinatorMetrics::Create({});
  ASSERT_TRUE(created.ok()) << created.status();
  CoordinatorMetrics& m = **created;
  EXPECT_EQ(m.port(), 0);                                  // No listener.
  m.RecordStep({v1::SPECULATION_METHOD_DRAFT, 3, 5, -2});  // accepted > proposed.
  m.RecordStep({static_cast<v1::SpeculationMethod>(42), -1, -1, 1});
  m.RecordRequest(static_cast<absl::StatusCode>(99));
  m.SetQueueDepth(-3);
  m.SetBusyFractions(std::nan(""), -1);
  const std::map<std::string, double> s = ParseExposition(m.Serialize());
  EXPECT_EQ(Get(s, "tandem_draft_tokens_proposed_total"), 3);
  EXPECT_EQ(Get(s, "tandem_draft_tokens_accepted_total"), 3);
  EXPECT_EQ(Get(s, "tandem_generated_tokens_total"), 1);
  EXPECT_EQ(Get(s, "tandem_accepted_length_sum"), 3);
  EXPECT_EQ(Get(s, "tandem_requests_total{status=\"unknown\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_queue_depth"), 0);
  EXPECT_EQ(Get(s, "tandem_draft_busy_fraction"), 0);
  EXPECT_EQ(Get(s, "tandem_target_busy_fraction"), 0);
}

// Tree methods (Medusa): nodes per speculative step next to the depth-based counters;
// position d is head d - 1's depth.
TEST(CoordinatorMetricsTest, RecordsVerifiedNodesOfTrees) {
  absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> created = CoordinatorMetrics::Create({});
  ASSERT_TRUE(created.ok()) << created.status();
  CoordinatorMetrics& m = **created;
  m.RecordStep({v1::SPECULATION_METHOD_MEDUSA, 2, 1, 2, 5});  // 5 nodes, depth 2.
  m.RecordStep({v1::SPECULATION_METHOD_MEDUSA, 3, 3, 4, 16});
  m.RecordStep({v1::SPECULATION_METHOD_MEDUSA, 0, 0, 1, 0});  // Plain: not observed.
  const std::map<std::string, double> s = ParseExposition(m.Serialize());
  EXPECT_EQ(Get(s, "tandem_verified_nodes_count"), 2);
  EXPECT_EQ(Get(s, "tandem_verified_nodes_sum"), 21);
  EXPECT_EQ(Get(s, "tandem_verified_nodes_bucket{le=\"4\"}"), 0);
  EXPECT_EQ(Get(s, "tandem_verified_nodes_bucket{le=\"8\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_verified_nodes_bucket{le=\"16\"}"), 2);
  EXPECT_EQ(Get(s, "tandem_position_accepted_total{position=\"1\"}"), 2);
  EXPECT_EQ(Get(s, "tandem_position_accepted_total{position=\"3\"}"), 1);
  EXPECT_EQ(Get(s, "tandem_speculation_steps_total{method=\"medusa\"}"), 3);
}

TEST(CoordinatorMetricsTest, RejectsBadOptions) {
  EXPECT_EQ(CoordinatorMetrics::Create({"localhost", 8}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CoordinatorMetrics::Create({"127.0.0.1:70000", 8}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CoordinatorMetrics::Create({"", 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CoordinatorMetricsTest, PortInUseIsUnavailable) {
  absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> first =
      CoordinatorMetrics::Create({"127.0.0.1:0", 8});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> second =
      CoordinatorMetrics::Create({taken, 8});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr(taken));
}

TEST(LabelsTest, Names) {
  EXPECT_EQ(StatusLabel(absl::StatusCode::kDeadlineExceeded), "deadline_exceeded");
  EXPECT_EQ(MethodLabel(v1::SPECULATION_METHOD_PROMPT_LOOKUP), "prompt_lookup");
  EXPECT_EQ(MethodLabel(static_cast<v1::SpeculationMethod>(42)), "unknown_42");
}

}  // namespace
}  // namespace tandem::coordinator
