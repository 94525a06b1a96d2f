#include "client/local_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
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

TEST(LocalClusterTest, StartsEveryProcessInOneGroupAndStopsThem) {
  LocalClusterOptions options;
  options.stop_grace = absl::Seconds(5);
  options.probe = [](const std::string& address) {
    return address == "b" ? absl::UnavailableError("NOT_SERVING") : absl::OkStatus();
  };
  auto cluster =
      LocalCluster::Start({Shell("a", "exec sleep 60"), Shell("b", "exec sleep 60")}, options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  LocalCluster& c = **cluster;
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c.name(1), "b");
  EXPECT_TRUE(c.Probe(0).ok());
  EXPECT_EQ(c.Probe(1).message(), "NOT_SERVING");
  EXPECT_EQ(c.LogPath(0), TempDir() + "/a.log");
  const std::vector<pid_t> pids = c.pids();
  ASSERT_EQ(pids.size(), 2u);
  for (size_t i = 0; i < pids.size(); ++i) {
    EXPECT_TRUE(Alive(pids[i]));
    EXPECT_EQ(c.pid(i), pids[i]);
    EXPECT_FALSE(c.Exited(i));
    EXPECT_EQ(getpgid(pids[i]), c.process_group());
  }
  c.Stop();
  for (pid_t pid : pids) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST(LocalClusterTest, DeadProcessIsRespawnedInTheGroupWithItsLogKept) {
  LocalClusterOptions options;
  options.probe = [](const std::string&) { return absl::OkStatus(); };
  auto cluster = LocalCluster::Start(
      {Shell("coordinator", "exec sleep 60"), Shell("draft", "echo incarnation $$; exec sleep 60")},
      options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  LocalCluster& c = **cluster;
  const pid_t first = c.pid(1);
  EXPECT_FALSE(c.Respawn(1).ok());  // Still running.
  for (int i = 0; i < 250 && c.LogTail(1).empty(); ++i) absl::SleepFor(absl::Milliseconds(20));
  // The new incarnation joins the cluster's group and appends to the same log.
  kill(first, SIGKILL);
  for (int i = 0; i < 250 && !c.Exited(1); ++i) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(c.Exited(1));
  EXPECT_THAT(c.ExitDescription(1), HasSubstr("killed by signal 9"));
  ASSERT_TRUE(c.Respawn(1).ok());
  const pid_t second = c.pid(1);
  EXPECT_NE(second, first);
  EXPECT_FALSE(c.Exited(1));
  EXPECT_EQ(getpgid(second), c.process_group());
  absl::SleepFor(absl::Milliseconds(300));  // Let it write its line.
  const std::string log = c.LogTail(1);
  EXPECT_THAT(log, HasSubstr(absl::StrCat("incarnation ", first)));
  EXPECT_THAT(log,
              HasSubstr("--- tandem up: restarting draft (the previous one killed by signal 9"));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("incarnation ", second)));
  c.Stop();
  EXPECT_FALSE(Alive(second));
  EXPECT_FALSE(c.Respawn(1).ok());  // Stopped clusters stay stopped.
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

TEST(LocalClusterTest, SpawnFailureStopsTheOthersAndNamesTheProcess) {
  ProcessSpec missing = Shell("draft", "");
  missing.binary = "/nonexistent/tandem-worker";
  auto cluster = LocalCluster::Start({Shell("coordinator", "exec sleep 60"), missing}, {});
  ASSERT_FALSE(cluster.ok());
  EXPECT_THAT(std::string(cluster.status().message()), HasSubstr("draft: cannot execute"));
}

}  // namespace
}  // namespace tandem::client
