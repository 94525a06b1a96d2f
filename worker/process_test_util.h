// Helpers for tests that run tandem-worker processes: spawn with logs, signals, exit
// codes, free ports, health and Worker stubs.
#ifndef TANDEM_WORKER_PROCESS_TEST_UTIL_H_
#define TANDEM_WORKER_PROCESS_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem {
namespace worker {
namespace testing {

// Path of the tandem-worker binary in the test's runfiles.
std::string WorkerBinary();
// A scratch directory for this test (TEST_TMPDIR or /tmp).
std::string TestTempDir();
// A TCP port that was free a moment ago on 127.0.0.1.
int FreePort();

// A child process with stdout and stderr in `log_path`. Killed (SIGKILL) on destruction
// if still running.
class ChildProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::string& binary,
                                                             const std::vector<std::string>& args,
                                                             const std::string& log_path);
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  void Signal(int signal);
  // Waits up to `timeout`: the exit code; -1 when still running (then SIGKILLed);
  // -2 when ended by a signal.
  int Wait(absl::Duration timeout);
  bool Running();
  // User + system CPU time so far, seconds (from /proc).
  double CpuSeconds() const;
  // The last `bytes` of the log.
  std::string LogTail(size_t bytes = 4000) const;
  const std::string& log_path() const { return log_path_; }

 private:
  ChildProcess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_;
  bool reaped_ = false;
  std::string log_path_;
};

// grpc.health.v1 Check of `service` ("" = the whole server) at `address`, plaintext,
// 2 s deadline. kUnknownService: the server answered NOT_FOUND (no such service);
// kUnreachable: any other failure.
enum class Health { kServing, kNotServing, kUnknownService, kUnreachable };
Health CheckHealth(const std::string& address, const std::string& service = "");
// Polls until the health is `want`; returns whether it got there within `timeout`.
bool WaitForHealth(const std::string& address, Health want, absl::Duration timeout,
                   const std::string& service = "");

std::unique_ptr<v1::Worker::Stub> WorkerStub(const std::string& address);

// A target worker on loopback: one process (tp = 1) or a tensor-parallel group of tp
// processes joined by the worker's default collective (tcp; "--comm=gloo" among
// `extra_flags` picks gloo) through a fresh file-store directory and a unique run id.
// Each process gets --threads=1 and `extra_flags` (a --rendezvous=host:port among them
// replaces the file store); logs go to `log_dir`. A model_dir of "synthetic:<model>"
// starts the ranks with --synthetic=<model> instead (benchmarks).
class WorkerGroup {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerGroup>> Start(
      const std::string& model_dir, int tp, const std::string& tag,
      const std::vector<std::string>& extra_flags, const std::string& binary = WorkerBinary(),
      const std::string& log_dir = TestTempDir());

  int size() const { return static_cast<int>(ports_.size()); }
  std::string address(int rank) const;
  std::string leader_address() const { return address(0); }
  ChildProcess& process(int rank) { return *processes_[rank]; }
  // Starts rank `rank` again with the same flags (after it died).
  absl::Status Restart(int rank);
  // Log tails of every rank, for failure messages.
  std::string Logs() const;

 private:
  WorkerGroup() = default;
  std::vector<std::string> Args(int rank) const;

  std::string model_dir_, tag_, store_dir_, binary_, log_dir_;
  std::vector<std::string> extra_flags_;
  std::vector<int> ports_;
  std::vector<int> starts_;  // Starts per rank (names the log files).
  std::vector<std::unique_ptr<ChildProcess>> processes_;
};

}  // namespace testing
}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_PROCESS_TEST_UTIL_H_
