// A CPU backend across processes (built once per backend: TANDEM_TEST_BACKEND is "gloo"
// or "tcp"): four comm_test_peer processes rendezvous through the file store and
// through the Rendezvous gRPC service hosted here, and run the collective checks; a
// killed rank makes the others fail within a bounded time.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/file_store.h"
#include "comm/rendezvous_service.h"
#include "common/server.h"

extern char** environ;

namespace tandem {
namespace {

constexpr int kRanks = 4;
constexpr char kBackend[] = TANDEM_TEST_BACKEND;
// tcp notices a dead peer from its closed connection, not from a timeout: give its
// calls a timeout far above the bound the test expects.
constexpr bool kIsTcp = kBackend[0] == 't';
constexpr double kCallTimeoutS = kIsTcp ? 30 : 3;

std::string PeerPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/tandem/comm/comm_test_peer");
}

std::string TempParent() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string path = PeerPath();
  argv.push_back(path.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int err = posix_spawn(&pid, path.c_str(), nullptr, nullptr, argv.data(), environ);
  EXPECT_EQ(err, 0) << "cannot start " << path;
  return err == 0 ? pid : -1;
}

// Waits up to `timeout` for `pid`; returns its exit code, or -1 (killed on timeout) or
// -2 (ended by a signal).
int WaitExit(pid_t pid, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
    if (absl::Now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

// Starts ranks 0..kRanks-1 in `mode` with `store_flag`; returns their pids.
std::vector<pid_t> StartGroup(const std::string& store_flag, const std::string& run_id,
                              const std::vector<std::string>& modes) {
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; ++r) {
    pids.push_back(Spawn({"--mode=" + modes[r], absl::StrCat("--rank=", r),
                          absl::StrCat("--size=", kRanks), "--run_id=" + run_id, store_flag,
                          "--comm_hostname=127.0.0.1", absl::StrCat("--comm_backend=", kBackend),
                          absl::StrCat("--call_timeout_s=", kCallTimeoutS)}));
  }
  return pids;
}

TEST(MultiProcessTest, ChecksPassOverTheFileStore) {
  auto store = FileStore::CreateFresh(TempParent());
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<pid_t> pids = StartGroup("--comm_store_dir=" + (*store)->directory(), "files1",
                                       std::vector<std::string>(kRanks, "checks"));
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_GT(pids[r], 0);
    EXPECT_EQ(WaitExit(pids[r], absl::Seconds(25)), 0) << "rank " << r;
  }
}

TEST(MultiProcessTest, ChecksPassOverTheRendezvousService) {
  RendezvousService service;
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = GrpcServer::Start(options, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<pid_t> pids =
      StartGroup(absl::StrCat("--comm_rendezvous=127.0.0.1:", (*server)->port()), "grpc1",
                 std::vector<std::string>(kRanks, "checks"));
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_GT(pids[r], 0);
    EXPECT_EQ(WaitExit(pids[r], absl::Seconds(25)), 0) << "rank " << r;
  }
  // Each rank published its address under the run id.
  EXPECT_GE(service.num_keys(), static_cast<size_t>(kRanks));
  service.Shutdown();
  (*server)->Shutdown(absl::Seconds(1));
}

TEST(MultiProcessTest, KilledRankMakesTheOthersFail) {
  auto files = FileStore::CreateFresh(TempParent());
  ASSERT_TRUE(files.ok()) << files.status();
  const std::string dir = (*files)->directory();
  std::vector<std::string> modes(kRanks, "until_failure");
  modes[kRanks - 1] = "hang";
  std::vector<pid_t> pids = StartGroup("--comm_store_dir=" + dir, "death1", modes);
  for (pid_t pid : pids) ASSERT_GT(pid, 0);
  std::vector<std::string> ready;
  for (int r = 0; r < kRanks; ++r) ready.push_back(absl::StrCat("death1/ready/", r));
  auto all_ready = (*files)->Get(ready, absl::Seconds(20));
  ASSERT_TRUE(all_ready.ok()) << all_ready.status();

  absl::Time killed_at = absl::Now();
  kill(pids[kRanks - 1], SIGKILL);
  EXPECT_EQ(WaitExit(pids[kRanks - 1], absl::Seconds(5)), -2);
  for (int r = 0; r < kRanks - 1; ++r) {
    const int code = WaitExit(pids[r], absl::Seconds(10));
    if (kIsTcp) {
      // UNAVAILABLE from the closed connection (the call timeout is 30 s).
      EXPECT_EQ(code, 3) << "rank " << r;
    } else {
      // UNAVAILABLE or DEADLINE_EXCEEDED (3 s call timeout).
      EXPECT_TRUE(code == 3 || code == 6) << "rank " << r << " exit " << code;
    }
  }
  absl::Duration took = absl::Now() - killed_at;
  std::printf("%s: surviving ranks failed %s after the kill\n", kBackend,
              absl::FormatDuration(took).c_str());
  // Allows start-up noise on a busy machine; for tcp still far below the call timeout.
  EXPECT_LT(took, kIsTcp ? absl::Seconds(5) : absl::Seconds(10));
}

}  // namespace
}  // namespace tandem
