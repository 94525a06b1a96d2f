#include "client/child_process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/time/clock.h"
#include "client/cpu_set.h"

namespace tandem::client {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

ChildOptions Shell(const std::string& script, const std::string& log = "") {
  ChildOptions o;
  o.binary = "/bin/sh";
  o.args = {"-c", script};
  o.log_path = log;
  return o;
}

TEST(ChildProcessTest, OutputGoesToTheLogAndExitCodeIsReported) {
  const std::string log = TempPath("out.log");
  auto child = ChildProcess::Spawn(Shell("echo to-stdout; echo to-stderr >&2; exit 3", log));
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)));
  EXPECT_EQ((*child)->exit_code(), 3);
  EXPECT_EQ((*child)->ExitDescription(), "exited with code 3");
  const std::string text = ReadFile(log);
  EXPECT_THAT(text, HasSubstr("to-stdout"));
  EXPECT_THAT(text, HasSubstr("to-stderr"));
}

TEST(ChildProcessTest, MissingBinaryOrLogDirectoryFailsClearly) {
  ChildOptions o;
  o.binary = "/nonexistent/tandem-worker";
  auto missing = ChildProcess::Spawn(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/tandem-worker"));
  auto bad_log = ChildProcess::Spawn(Shell("true", "/nonexistent/dir/x.log"));
  ASSERT_FALSE(bad_log.ok());
  EXPECT_THAT(std::string(bad_log.status().message()), HasSubstr("log file"));
}

TEST(ChildProcessTest, PinsToTheGivenCores) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const int core = allowed.back();
  const std::string log = TempPath("affinity.log");
  ChildOptions o = Shell("grep Cpus_allowed_list /proc/self/status", log);
  o.cpus = {core};
  auto child = ChildProcess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)));
  EXPECT_EQ((*child)->exit_code(), 0);
  EXPECT_THAT(ReadFile(log), HasSubstr("Cpus_allowed_list:\t" + std::to_string(core) + "\n"));
}

TEST(ChildProcessTest, ChildrenShareOneNewProcessGroup) {
  auto first = ChildProcess::Spawn(Shell("sleep 30"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(getpgid((*first)->pid()), (*first)->pid());
  EXPECT_NE(getpgid((*first)->pid()), getpgrp());
  ChildOptions o = Shell("sleep 30");
  o.process_group = (*first)->process_group();
  auto second = ChildProcess::Spawn(o);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(getpgid((*second)->pid()), (*first)->pid());
  kill(-(*first)->pid(), SIGKILL);
  EXPECT_TRUE((*first)->WaitFor(absl::Seconds(10)));
  EXPECT_TRUE((*second)->WaitFor(absl::Seconds(10)));
  EXPECT_THAT((*second)->ExitDescription(), HasSubstr("killed by signal 9"));
}

TEST(ChildProcessTest, SignalsBlockedInTheParentAreUnblockedInTheChild) {
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &old), 0);
  auto child = ChildProcess::Spawn(Shell("sleep 30"));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(child.ok()) << child.status();
  absl::SleepFor(absl::Milliseconds(100));
  (*child)->Signal(SIGTERM);
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)));
  EXPECT_THAT((*child)->ExitDescription(), HasSubstr("killed by signal 15"));
}

TEST(ChildProcessTest, DestructorKillsARunningChild) {
  pid_t pid;
  {
    auto child = ChildProcess::Spawn(Shell("sleep 30"));
    ASSERT_TRUE(child.ok()) << child.status();
    pid = (*child)->pid();
  }
  EXPECT_EQ(kill(pid, 0), -1);  // Gone and reaped.
}

TEST(ChildProcessTest, ChildIsSignalledWhenItsParentDies) {
  // This test process adopts orphans so that it can reap the grandchild.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t middle = fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    close(fds[0]);
    auto child = ChildProcess::Spawn(Shell("sleep 30"));
    pid_t pid = child.ok() ? (*child)->pid() : -1;
    ssize_t ignored = write(fds[1], &pid, sizeof(pid));
    (void)ignored;
    _exit(0);  // Dies without cleaning up: the grandchild must get its death signal.
  }
  close(fds[1]);
  pid_t grandchild = -1;
  ASSERT_EQ(read(fds[0], &grandchild, sizeof(grandchild)),
            static_cast<ssize_t>(sizeof(grandchild)));
  close(fds[0]);
  ASSERT_GT(grandchild, 0);
  int status = 0;
  ASSERT_EQ(waitpid(middle, &status, 0), middle);
  const absl::Time end = absl::Now() + absl::Seconds(10);
  pid_t reaped = 0;
  while (absl::Now() < end) {
    reaped = waitpid(grandchild, &status, WNOHANG);
    if (reaped == grandchild) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  ASSERT_EQ(reaped, grandchild) << "grandchild outlived its parent";
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(TailOfFileTest, ReturnsTheLastLines) {
  const std::string path = TempPath("tail.txt");
  {
    std::ofstream out(path);
    for (int i = 1; i <= 30; ++i) out << "line " << i << "\n";
  }
  EXPECT_EQ(TailOfFile(path, 3), "line 28\nline 29\nline 30");
  // A byte limit drops the partial first line.
  EXPECT_EQ(TailOfFile(path, 100, 12), "line 30");
  EXPECT_EQ(TailOfFile("/nonexistent", 3), "");
}

}  // namespace
}  // namespace tandem::client
