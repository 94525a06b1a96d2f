// Stalled (SIGSTOP) workers: the coordinator's per-step deadline (--step_timeout_s)
// keeps requests moving or ends them; none hangs past its deadline; after SIGCONT the
// system recovers.
//  * Draft stalled: its step times out, the streams fall back to target-only decoding
//    and finish with the undisturbed greedy output; after SIGCONT speculation resumes.
//  * Target follower stalled briefly: the streams pause, then resume once the group
//    has re-formed, token-identical to the undisturbed run.
//  * Target follower stalled for longer than --target_recovery_timeout_s: streams
//    with a client deadline end DEADLINE_EXCEEDED by it, the others UNAVAILABLE soon
//    after the recovery timeout; after SIGCONT the group and new requests recover.
// The three cases share one cluster (each ends by checking that it recovered).
#include <gtest/gtest.h>

#include <csignal>

#include "absl/time/clock.h"
#include "tests/e2e/cluster.h"
#include "tests/fault/stream_recorder.h"

namespace tandem::fault {
namespace {

using e2e::Cluster;
using e2e::ClusterOptions;
using worker::testing::Health;

constexpr int kStreams = 4;
constexpr int kTokens = 160;
constexpr int kStepTimeoutS = 3;       // Coordinator's per-step deadline.
constexpr int kRecoveryTimeoutS = 15;  // Coordinator's --target_recovery_timeout_s.

// One cluster for the three cases (each starts from a serving cluster and ends by
// checking that it recovered: speculation resumed, or undisturbed outputs after the
// follower came back), with the undisturbed greedy outputs computed once.
class StalledWorkerE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.tp = 2;
    options.tag = "stall";
    options.worker_flags = {"--step_timeout_s=3", "--heartbeat_s=0.5", "--leader_timeout_s=4",
                            "--regroup_timeout_s=4"};
    options.coordinator_flags = {absl::StrCat("--step_timeout_s=", kStepTimeoutS),
                                 absl::StrCat("--target_recovery_timeout_s=", kRecoveryTimeoutS)};
    auto started = Cluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = started->release();
    stub_ = cluster_->Client().release();
    prompts_ = new std::vector<std::string>(e2e::TestPrompts(kStreams));
    baseline_ = new std::vector<std::vector<int>>();
    auto streams = Start(absl::InfiniteDuration());
    for (int i = 0; i < kStreams; ++i) {
      streams[i]->Join();
      ASSERT_TRUE(streams[i]->status().ok()) << streams[i]->status().error_message();
      baseline_->push_back(streams[i]->tokens());
    }
  }
  static void TearDownTestSuite() {
    delete stub_;
    delete cluster_;
    delete prompts_;
    delete baseline_;
    stub_ = nullptr;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr) << "the cluster did not start";
    ASSERT_EQ(baseline_->size(), static_cast<size_t>(kStreams)) << "no undisturbed outputs";
  }

  static std::vector<std::unique_ptr<RecordedStream>> Start(absl::Duration deadline) {
    std::vector<std::unique_ptr<RecordedStream>> streams;
    for (const std::string& p : *prompts_) {
      streams.push_back(std::make_unique<RecordedStream>(
          stub_, GreedyRequest(p, kTokens, v1::SPECULATION_METHOD_DRAFT, 3), deadline));
    }
    return streams;
  }

  // Every stream finishes OK with the undisturbed tokens.
  void ExpectUndisturbedOutputs(std::vector<std::unique_ptr<RecordedStream>>& streams) {
    for (int i = 0; i < kStreams; ++i) {
      streams[i]->Join();
      EXPECT_TRUE(streams[i]->status().ok())
          << "stream " << i << ": " << streams[i]->status().error_message() << "\n"
          << cluster_->Logs();
      EXPECT_EQ(streams[i]->tokens(), (*baseline_)[i]) << "stream " << i;
    }
  }

  static Cluster* cluster_;
  static v1::Tandem::Stub* stub_;
  static std::vector<std::string>* prompts_;
  static std::vector<std::vector<int>>* baseline_;
};
Cluster* StalledWorkerE2eTest::cluster_ = nullptr;
v1::Tandem::Stub* StalledWorkerE2eTest::stub_ = nullptr;
std::vector<std::string>* StalledWorkerE2eTest::prompts_ = nullptr;
std::vector<std::vector<int>>* StalledWorkerE2eTest::baseline_ = nullptr;

TEST_F(StalledWorkerE2eTest, StalledDraftFallsBackThenResumes) {
  worker::testing::ChildProcess& draft = cluster_->draft()->process(0);
  auto streams = Start(absl::InfiniteDuration());
  ASSERT_TRUE(WaitForTokens(streams, 4, absl::Seconds(60))) << cluster_->Logs();
  draft.Signal(SIGSTOP);
  const absl::Time stopped = absl::Now();
  ExpectUndisturbedOutputs(streams);
  int fallback = 0;
  for (const auto& s : streams) fallback += s->stats().fallback_steps();
  EXPECT_GT(fallback, 0) << "no stream reported a step without the draft";
  absl::Duration slowest;
  for (const auto& s : streams) slowest = std::max(slowest, s->ended() - stopped);
  std::printf(
      "draft stopped: %d streams finished target-only %.1f s after SIGSTOP (%d "
      "fallback steps)\n",
      kStreams, absl::ToDoubleSeconds(slowest), fallback);
  ASSERT_TRUE(cluster_->WaitForDraftAvailable(false, absl::Seconds(1)));

  draft.Signal(SIGCONT);
  ASSERT_TRUE(cluster_->WaitForDraftAvailable(true, absl::Seconds(30))) << cluster_->Logs();
  RecordedStream again(stub_,
                       GreedyRequest((*prompts_)[0], kTokens, v1::SPECULATION_METHOD_DRAFT, 3));
  again.Join();
  ASSERT_TRUE(again.status().ok()) << again.status().error_message();
  EXPECT_EQ(again.tokens(), (*baseline_)[0]);
  EXPECT_GT(again.stats().draft_tokens_proposed(), 0u) << "speculation did not resume";
}

TEST_F(StalledWorkerE2eTest, BrieflyStalledFollowerPausesThenStreamsResume) {
  worker::testing::ChildProcess& follower = cluster_->target().process(1);
  auto streams = Start(absl::InfiniteDuration());
  ASSERT_TRUE(WaitForTokens(streams, 4, absl::Seconds(60))) << cluster_->Logs();
  follower.Signal(SIGSTOP);
  const absl::Time stopped = absl::Now();
  absl::SleepFor(absl::Seconds(kStepTimeoutS + 1));
  follower.Signal(SIGCONT);
  ExpectUndisturbedOutputs(streams);
  absl::Duration slowest;
  for (const auto& s : streams) slowest = std::max(slowest, s->ended() - stopped);
  std::printf("follower stopped %d s: streams done %.1f s after SIGSTOP\n", kStepTimeoutS + 1,
              absl::ToDoubleSeconds(slowest));
  EXPECT_LT(slowest, absl::Seconds(kRecoveryTimeoutS));
}

TEST_F(StalledWorkerE2eTest, LongStalledFollowerEndsRequestsInTimeThenRecovers) {
  worker::testing::ChildProcess& follower = cluster_->target().process(1);
  constexpr absl::Duration kClientDeadline = absl::Seconds(8);
  // Half the streams with a client deadline, half without.
  std::vector<std::unique_ptr<RecordedStream>> with_deadline = Start(kClientDeadline);
  std::vector<std::unique_ptr<RecordedStream>> without = Start(absl::InfiniteDuration());
  ASSERT_TRUE(WaitForTokens(with_deadline, 4, absl::Seconds(7))) << cluster_->Logs();
  ASSERT_TRUE(WaitForTokens(without, 4, absl::Seconds(7))) << cluster_->Logs();
  follower.Signal(SIGSTOP);
  const absl::Time stopped = absl::Now();
  for (auto& s : with_deadline) {
    s->Join();
    EXPECT_EQ(s->status().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << s->status().error_message();
    EXPECT_LE(s->ended() - s->started(), kClientDeadline + absl::Seconds(1));
  }
  // Detection takes at most one step deadline; then the recovery timeout runs.
  const absl::Duration bound = absl::Seconds(kStepTimeoutS + kRecoveryTimeoutS + 5);
  for (auto& s : without) {
    s->Join();
    EXPECT_EQ(s->status().error_code(), grpc::StatusCode::UNAVAILABLE)
        << s->status().error_message();
    const absl::Duration waited = s->ended() - stopped;
    EXPECT_GE(waited, absl::Seconds(kRecoveryTimeoutS - 1));
    EXPECT_LE(waited, bound);
    std::printf("follower stopped: stream without deadline UNAVAILABLE after %.1f s\n",
                absl::ToDoubleSeconds(waited));
  }

  follower.Signal(SIGCONT);
  const absl::Time resumed = absl::Now();
  ASSERT_TRUE(worker::testing::WaitForHealth(cluster_->target().leader_address(), Health::kServing,
                                             absl::Seconds(60)))
      << cluster_->Logs();
  std::printf("follower resumed: group serving again %.1f s after SIGCONT\n",
              absl::ToDoubleSeconds(absl::Now() - resumed));
  absl::SleepFor(absl::Seconds(1));  // The coordinator's monitor probes every 200 ms.
  auto streams = Start(absl::InfiniteDuration());
  ExpectUndisturbedOutputs(streams);
}

}  // namespace
}  // namespace tandem::fault
