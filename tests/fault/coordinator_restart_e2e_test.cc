// The coordinator goes away under load while the workers keep running.
//  * SIGKILL: its clients see UNAVAILABLE; the sequences it had on the workers are
//    orphaned and the workers release them when their lease (--lease_timeout_s)
//    expires, so every KV block is free again; a restarted coordinator serves new
//    requests with the same greedy output as before.
//  * SIGTERM: a graceful drain: health (the whole server and tandem.v1.Tandem, on
//    the --health_listen port) turns NOT_SERVING while streams in flight finish
//    (within the grace period), then the coordinator releases their sequences on the
//    workers at once.
#include <gtest/gtest.h>

#include <csignal>

#include "absl/strings/str_cat.h"
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
constexpr int kLeaseTimeoutS = 3;

struct Kv {
  int64_t target = -1, draft = -1;
  uint64_t expired = 0;  // Leases expired, both workers.
};

Kv KvOf(Cluster& cluster) {
  Kv kv;
  auto t = e2e::WorkerStatsOf(cluster.target().leader_address());
  auto d = e2e::WorkerStatsOf(cluster.draft()->leader_address());
  if (t.ok()) {
    kv.target = t->kv_used_blocks();
    kv.expired += t->leases_expired();
  }
  if (d.ok()) {
    kv.draft = d->kv_used_blocks();
    kv.expired += d->leases_expired();
  }
  return kv;
}

// Waits until both workers hold no KV blocks; the time it took, or infinite.
absl::Duration TimeUntilKvFree(Cluster& cluster, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  while (absl::Now() - start < timeout) {
    Kv kv = KvOf(cluster);
    if (kv.target == 0 && kv.draft == 0) return absl::Now() - start;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::InfiniteDuration();
}

std::vector<std::unique_ptr<RecordedStream>> StartStreams(v1::Tandem::Stub* stub,
                                                          const std::vector<std::string>& prompts) {
  std::vector<std::unique_ptr<RecordedStream>> streams;
  for (const std::string& p : prompts) {
    streams.push_back(std::make_unique<RecordedStream>(
        stub, GreedyRequest(p, kTokens, v1::SPECULATION_METHOD_DRAFT, 3)));
  }
  return streams;
}

TEST(CoordinatorRestartE2eTest, OrphanedSequencesExpireAndARestartedCoordinatorServes) {
  ClusterOptions options;
  options.tp = 1;
  options.tag = "coordrestart";
  options.worker_flags = {absl::StrCat("--lease_timeout_s=", kLeaseTimeoutS)};
  const std::string health = absl::StrCat("127.0.0.1:", worker::testing::FreePort());
  options.coordinator_flags = {"--health_listen=" + health};
  auto started = Cluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  Cluster& cluster = **started;
  const std::vector<std::string> prompts = e2e::TestPrompts(kStreams);
  // Per-service health: the served service is known on both ports, others are not.
  for (const std::string& address : {cluster.address(), health}) {
    EXPECT_EQ(worker::testing::CheckHealth(address, ""), Health::kServing) << address;
    EXPECT_EQ(worker::testing::CheckHealth(address, "tandem.v1.Tandem"), Health::kServing)
        << address;
    EXPECT_EQ(worker::testing::CheckHealth(address, "tandem.v1.Worker"), Health::kUnknownService)
        << address;
  }

  std::vector<std::vector<int>> baseline(kStreams);
  {
    auto stub = cluster.Client();
    auto streams = StartStreams(stub.get(), prompts);
    for (int i = 0; i < kStreams; ++i) {
      streams[i]->Join();
      ASSERT_TRUE(streams[i]->status().ok()) << streams[i]->status().error_message();
      baseline[i] = streams[i]->tokens();
    }
  }
  ASSERT_LT(TimeUntilKvFree(cluster, absl::Seconds(5)), absl::Seconds(5));
  const uint64_t expired_before = KvOf(cluster).expired;

  // SIGKILL under load.
  {
    auto stub = cluster.Client();
    auto streams = StartStreams(stub.get(), prompts);
    ASSERT_TRUE(WaitForTokens(streams, 4, absl::Seconds(60))) << cluster.Logs();
    cluster.coordinator().Signal(SIGKILL);
    const absl::Time killed = absl::Now();
    for (int i = 0; i < kStreams; ++i) {
      streams[i]->Join();
      EXPECT_EQ(streams[i]->status().error_code(), grpc::StatusCode::UNAVAILABLE)
          << "stream " << i << ": " << streams[i]->status().error_message();
      EXPECT_LT(streams[i]->ended() - killed, absl::Seconds(5));
    }
    // The orphans hold KV until their lease expires.
    const Kv orphaned = KvOf(cluster);
    EXPECT_GT(orphaned.target, 0);
    EXPECT_GT(orphaned.draft, 0);
    const absl::Duration freed = TimeUntilKvFree(cluster, absl::Seconds(kLeaseTimeoutS + 10));
    ASSERT_LT(freed, absl::InfiniteDuration()) << "orphaned sequences never released\n"
                                               << cluster.Logs();
    const absl::Duration since_kill = absl::Now() - killed;
    std::printf(
        "SIGKILL: orphaned KV blocks target %lld, draft %lld; all free %.1f s after "
        "the kill (lease %d s)\n",
        static_cast<long long>(orphaned.target), static_cast<long long>(orphaned.draft),
        absl::ToDoubleSeconds(since_kill), kLeaseTimeoutS);
    EXPECT_GE(since_kill, absl::Seconds(kLeaseTimeoutS) - absl::Milliseconds(500));
    EXPECT_GE(KvOf(cluster).expired - expired_before, static_cast<uint64_t>(kStreams))
        << "expected the leases of the orphans (target and draft) to expire";
  }

  // A new coordinator on the same port serves again, with the same outputs.
  ASSERT_TRUE(cluster.RestartCoordinator(SIGKILL).ok()) << cluster.Logs();
  {
    auto stub = cluster.Client();
    auto streams = StartStreams(stub.get(), prompts);
    for (int i = 0; i < kStreams; ++i) {
      streams[i]->Join();
      ASSERT_TRUE(streams[i]->status().ok()) << streams[i]->status().error_message();
      EXPECT_EQ(streams[i]->tokens(), baseline[i]) << "stream " << i;
    }
  }

  // SIGTERM under load: the streams in flight drain, then the KV is released at once.
  {
    ASSERT_LT(TimeUntilKvFree(cluster, absl::Seconds(5)), absl::Seconds(5));
    const uint64_t expired = KvOf(cluster).expired;
    auto stub = cluster.Client();
    auto streams = StartStreams(stub.get(), prompts);
    ASSERT_TRUE(WaitForTokens(streams, 4, absl::Seconds(60))) << cluster.Logs();
    cluster.coordinator().Signal(SIGTERM);
    // Draining: the probe port reports NOT_SERVING while the streams still run.
    EXPECT_TRUE(worker::testing::WaitForHealth(health, Health::kNotServing, absl::Seconds(5),
                                               "tandem.v1.Tandem"))
        << cluster.Logs();
    EXPECT_EQ(worker::testing::CheckHealth(health, ""), Health::kNotServing);
    int running = 0;
    for (const auto& stream : streams) running += stream->tokens_received() < kTokens;
    EXPECT_GT(running, 0) << "every stream had ended: the check was not during the drain";
    for (int i = 0; i < kStreams; ++i) {
      streams[i]->Join();
      EXPECT_TRUE(streams[i]->status().ok()) << streams[i]->status().error_message();
      EXPECT_EQ(streams[i]->tokens(), baseline[i]) << "stream " << i;
    }
    EXPECT_EQ(cluster.coordinator().Wait(absl::Seconds(15)), 0) << cluster.Logs();
    EXPECT_LT(TimeUntilKvFree(cluster, absl::Seconds(kLeaseTimeoutS + 5)),
              absl::Seconds(kLeaseTimeoutS) - absl::Milliseconds(500))
        << "a drained coordinator should release its sequences itself";
    EXPECT_EQ(KvOf(cluster).expired, expired) << "sequences were left to expire";
  }
}

}  // namespace
}  // namespace tandem::fault
