#include "client/local_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "absl/time/clock.h"

namespace tandem::client {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

ProcessSpec Shell(const std::string& name, const std::string& script) {
  ProcessSpec p;
  p.name = name;
  p.binary = "/bin/sh";
  p.args = {"-c", script};
  p.health_address = name;  // The fake probe keys on it.
  p.log_path = TempDir() + "/" + name + ".log";
  return p;
}

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

bool NoWait(absl::Duration d) {
  absl::SleepFor(d);
  return false;
}

TEST(LocalClusterTest, BecomesHealthyAndStopsEveryProcess) {
  std::atomic<int> probes{0};
  LocalClusterOptions options;
  options.stop_grace = absl::Seconds(5);
  // "b" becomes healthy only on its third probe.
  options.probe = [&probes](const std::string& address) {
    if (address == "b" && ++probes < 3) return absl::UnavailableError("NOT_SERVING");
    return absl::OkStatus();
  };
  std::vector<std::string> notes;
  options.note = [&notes](const std::string& line) { notes.push_back(line); };
  auto cluster =
      LocalCluster::Start({Shell("a", "exec sleep 60"), Shell("b", "exec sleep 60")}, options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE((*cluster)->WaitHealthy(absl::Seconds(20), NoWait).ok());
  EXPECT_EQ(probes.load(), 3);
  EXPECT_THAT(notes, ::testing::ElementsAre("a is healthy", "b is healthy"));
  const std::vector<pid_t> pids = (*cluster)->pids();
  ASSERT_EQ(pids.size(), 2u);
  for (pid_t pid : pids) {
    EXPECT_TRUE(Alive(pid));
    EXPECT_EQ(getpgid(pid), (*cluster)->process_group());
  }
  EXPECT_FALSE((*cluster)->FindExited().has_value());
  (*cluster)->Stop();
  for (pid_t pid : pids) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST(LocalClusterTest, StopsStageByStage) {
  const std::string order = TempDir() + "/stop_order.txt";
  std::remove(order.c_str());
  auto member = [&order](const std::string& name, int stage) {
    ProcessSpec p = Shell(name, "trap 'echo " + name + " >> " + order +
                                    "; exit 0' TERM; while :; do sleep 0.02; done");
    p.stop_stage = stage;
    return p;
  };
  LocalClusterOptions options;
  options.probe = [](const std::string&) { return absl::OkStatus(); };
  std::vector<std::string> notes;
  options.note = [&notes](const std::string& line) { notes.push_back(line); };
  auto cluster = LocalCluster::Start(
      {member("follower", 2), member("coordinator", 0), member("leader", 1)}, options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::SleepFor(absl::Milliseconds(200));  // Let the shells install their traps.
  (*cluster)->Stop();
  std::ifstream in(order);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "coordinator\nleader\nfollower\n");
  EXPECT_TRUE(notes.empty());  // Nobody needed SIGKILL.
}

TEST(LocalClusterTest, ProcessIgnoringSigtermIsKilled) {
  LocalClusterOptions options;
  options.stop_grace = absl::Milliseconds(600);
  options.probe = [](const std::string&) { return absl::OkStatus(); };
  std::vector<std::string> notes;
  options.note = [&notes](const std::string& line) { notes.push_back(line); };
  auto cluster = LocalCluster::Start(
      {Shell("stubborn", "trap '' TERM; while :; do sleep 0.1; done")}, options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const pid_t pid = (*cluster)->pids()[0];
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  (*cluster)->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(Alive(pid));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0], HasSubstr("stubborn"));
  EXPECT_THAT(notes[0], HasSubstr("killing it"));
}

TEST(LocalClusterTest, ProcessDyingDuringStartUpIsReportedWithItsLog) {
  LocalClusterOptions options;
  options.probe = [](const std::string&) { return absl::UnavailableError("connection refused"); };
  auto cluster = LocalCluster::Start(
      {Shell("coordinator", "exec sleep 60"),
       Shell("target-1", "echo 'tandem-worker: --model_dir: no config.json' >&2; exit 2")},
      options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::Status s = (*cluster)->WaitHealthy(absl::Seconds(20), NoWait);
  ASSERT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("target-1 (pid "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("exited with code 2"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("no config.json"));
  const pid_t survivor = (*cluster)->pids()[0];
  cluster->reset();  // The destructor stops the survivor.
  EXPECT_FALSE(Alive(survivor));
}

TEST(LocalClusterTest, DeathAfterStartUpIsFoundOnce) {
  LocalClusterOptions options;
  options.probe = [](const std::string&) { return absl::OkStatus(); };
  auto cluster =
      LocalCluster::Start({Shell("a", "exec sleep 60"), Shell("draft", "exec sleep 60")}, options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->WaitHealthy(absl::Seconds(5), NoWait).ok());
  kill((*cluster)->pids()[1], SIGKILL);
  std::optional<std::string> report;
  for (int i = 0; i < 200 && !report; ++i) {
    report = (*cluster)->FindExited();
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(report.has_value());
  EXPECT_THAT(*report, HasSubstr("draft"));
  EXPECT_THAT(*report, HasSubstr("killed by signal 9"));
  EXPECT_FALSE((*cluster)->FindExited().has_value());
}

TEST(LocalClusterTest, TimeoutAndInterruptionAreDistinct) {
  LocalClusterOptions options;
  options.probe = [](const std::string&) { return absl::UnavailableError("NOT_SERVING"); };
  auto cluster = LocalCluster::Start({Shell("slow", "exec sleep 60")}, options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::Status timeout = (*cluster)->WaitHealthy(absl::Milliseconds(300), NoWait);
  EXPECT_TRUE(absl::IsDeadlineExceeded(timeout)) << timeout;
  EXPECT_THAT(std::string(timeout.message()), HasSubstr("slow (NOT_SERVING)"));
  absl::Status interrupted =
      (*cluster)->WaitHealthy(absl::Seconds(30), [](absl::Duration) { return true; });
  EXPECT_TRUE(absl::IsCancelled(interrupted)) << interrupted;
}

TEST(LocalClusterTest, SpawnFailureStopsTheOthersAndNamesTheProcess) {
  ProcessSpec missing = Shell("draft", "");
  missing.binary = "/nonexistent/tandem-worker";
  auto cluster = LocalCluster::Start({Shell("coordinator", "exec sleep 60"), missing}, {});
  ASSERT_FALSE(cluster.ok());
  EXPECT_THAT(std::string(cluster.status().message()), HasSubstr("draft: cannot execute"));
}

}  // namespace
}  // namespace tandem::client
