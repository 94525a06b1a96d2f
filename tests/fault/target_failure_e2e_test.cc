// A target follower dies (SIGKILL) in the middle of greedy streams.
//  * Restarted within the recovery timeout: the streams pause, then resume by
//    re-prefilling from the coordinator's committed tokens and finish with exactly
//    the tokens of an undisturbed run (the concatenated stream is compared token by
//    token, so a repeated or skipped token fails).
//  * Not restarted: every stream ends UNAVAILABLE once --target_recovery_timeout_s has
//    passed (not before, not much later), with a partial output that is a prefix of
//    the undisturbed one.
// Runs on the default collective (tcp), so regrouping after a lost rank is tcp's.
// The leader's tandem.v1.Worker health is NOT_SERVING while it re-forms.
// (A killed draft worker is covered by tests/e2e/draft_failure_e2e_test.)
#include <gtest/gtest.h>

#include <csignal>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "tests/e2e/cluster.h"
#include "tests/fault/stream_recorder.h"

namespace tandem::fault {
namespace {

using e2e::Cluster;
using e2e::ClusterOptions;

constexpr int kStreams = 4;
constexpr int kTokens = 160;
constexpr int kRecoveryTimeoutS = 12;

std::vector<std::unique_ptr<RecordedStream>> StartStreams(v1::Tandem::Stub* stub,
                                                          const std::vector<std::string>& prompts) {
  std::vector<std::unique_ptr<RecordedStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    streams.push_back(std::make_unique<RecordedStream>(
        stub, GreedyRequest(prompts[i], kTokens, v1::SPECULATION_METHOD_DRAFT, 3)));
  }
  return streams;
}

bool IsPrefix(const std::vector<int>& prefix, const std::vector<int>& whole) {
  return prefix.size() <= whole.size() && std::equal(prefix.begin(), prefix.end(), whole.begin());
}

TEST(TargetFailureE2eTest, KilledFollowerPausesStreamsThenRestartOrTimeout) {
  ClusterOptions options;
  options.tp = 2;
  options.tag = "targetfail";
  options.worker_flags = {"--step_timeout_s=3", "--heartbeat_s=0.5", "--leader_timeout_s=4",
                          "--regroup_timeout_s=4"};
  options.coordinator_flags = {"--step_timeout_s=10",
                               absl::StrCat("--target_recovery_timeout_s=", kRecoveryTimeoutS)};
  auto started = Cluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  Cluster& cluster = **started;
  auto stub = cluster.Client();
  const std::vector<std::string> prompts = e2e::TestPrompts(kStreams);
  ASSERT_EQ(prompts.size(), static_cast<size_t>(kStreams));
  // Health per service: the leader serves tandem.v1.Worker, a follower serves health only.
  EXPECT_EQ(worker::testing::CheckHealth(cluster.target().leader_address(), "tandem.v1.Worker"),
            worker::testing::Health::kServing);
  EXPECT_EQ(worker::testing::CheckHealth(cluster.target().address(1), ""),
            worker::testing::Health::kServing);
  EXPECT_EQ(worker::testing::CheckHealth(cluster.target().address(1), "tandem.v1.Worker"),
            worker::testing::Health::kUnknownService);

  // The undisturbed run: the same streams, all at once.
  std::vector<std::vector<int>> baseline(kStreams);
  {
    auto streams = StartStreams(stub.get(), prompts);
    for (int i = 0; i < kStreams; ++i) {
      streams[i]->Join();
      ASSERT_TRUE(streams[i]->status().ok()) << streams[i]->status().error_message();
      baseline[i] = streams[i]->tokens();
      ASSERT_EQ(baseline[i].size(), static_cast<size_t>(kTokens));
    }
  }

  // 1. Kill rank 1 once every stream is under way, restart it a moment later.
  {
    auto streams = StartStreams(stub.get(), prompts);
    ASSERT_TRUE(WaitForTokens(streams, 4, absl::Seconds(60))) << cluster.Logs();
    cluster.target().process(1).Signal(SIGKILL);
    const absl::Time killed = absl::Now();
    std::vector<int> at_kill(kStreams);
    for (int i = 0; i < kStreams; ++i) at_kill[i] = streams[i]->tokens_received();
    ASSERT_EQ(cluster.target().process(1).Wait(absl::Seconds(5)), -2);
    absl::SleepFor(absl::Seconds(1));
    ASSERT_TRUE(cluster.target().Restart(1).ok());
    const absl::Time restarted = absl::Now();
    for (int i = 0; i < kStreams; ++i) {
      streams[i]->Join();
      SCOPED_TRACE(absl::StrCat("stream ", i));
      ASSERT_TRUE(streams[i]->status().ok()) << streams[i]->status().error_message() << "\n"
                                             << cluster.Logs();
      EXPECT_TRUE(streams[i]->finished());
      // Token for token: nothing repeated, nothing skipped.
      EXPECT_EQ(streams[i]->tokens(), baseline[i]);
      // It was interrupted (not already done) and it resumed after the restart.
      EXPECT_LT(at_kill[i], kTokens);
      EXPECT_GT(streams[i]->last_token_time(), restarted);
      EXPECT_LT(streams[i]->ended() - killed, absl::Seconds(kRecoveryTimeoutS));
    }
    absl::Duration slowest;
    for (const auto& s : streams) slowest = std::max(slowest, s->ended() - killed);
    std::printf("restart: follower down %.1f s, all %d streams done %.1f s after the kill\n",
                absl::ToDoubleSeconds(restarted - killed), kStreams,
                absl::ToDoubleSeconds(slowest));
    const std::string log = cluster.coordinator().LogTail(1 << 20);
    EXPECT_TRUE(absl::StrContains(log, "target group unavailable, pausing")) << log;
    EXPECT_TRUE(absl::StrContains(log, "target group is back")) << log;
  }

  // 2. Kill rank 1 again and leave it dead: UNAVAILABLE after the recovery timeout.
  {
    auto streams = StartStreams(stub.get(), prompts);
    ASSERT_TRUE(WaitForTokens(streams, 4, absl::Seconds(60))) << cluster.Logs();
    cluster.target().process(1).Signal(SIGKILL);
    const absl::Time killed = absl::Now();
    // The leader re-forming its group reports its Worker service NOT_SERVING.
    EXPECT_TRUE(worker::testing::WaitForHealth(
        cluster.target().leader_address(), worker::testing::Health::kNotServing,
        absl::Seconds(kRecoveryTimeoutS), "tandem.v1.Worker"))
        << cluster.Logs();
    for (int i = 0; i < kStreams; ++i) {
      streams[i]->Join();
      SCOPED_TRACE(absl::StrCat("stream ", i));
      EXPECT_EQ(streams[i]->status().error_code(), grpc::StatusCode::UNAVAILABLE)
          << streams[i]->status().error_message();
      EXPECT_TRUE(
          absl::StrContains(streams[i]->status().error_message(), "target group unavailable"))
          << streams[i]->status().error_message();
      const absl::Duration waited = streams[i]->ended() - killed;
      EXPECT_GE(waited, absl::Seconds(kRecoveryTimeoutS - 1));
      EXPECT_LE(waited, absl::Seconds(kRecoveryTimeoutS + 12));
      EXPECT_FALSE(streams[i]->finished());
      EXPECT_TRUE(IsPrefix(streams[i]->tokens(), baseline[i])) << "partial output diverged";
      std::printf("no restart: stream %d UNAVAILABLE %.1f s after the kill, %zu tokens\n", i,
                  absl::ToDoubleSeconds(waited), streams[i]->tokens().size());
    }
  }
}

}  // namespace
}  // namespace tandem::fault
