// A child process started by fork + exec, for `tandem up`: output to a log file,
// optional CPU pinning (sched_setaffinity before exec), membership of a shared process
// group, and PR_SET_PDEATHSIG so it is signalled when the parent dies, even by SIGKILL.
// The child starts with every signal unblocked, whatever the parent's mask.
//
// Not thread-safe; spawn from the main thread (the death signal follows the thread
// that forked).
#ifndef TANDEM_CLIENT_CHILD_PROCESS_H_
#define TANDEM_CLIENT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::client {

struct ChildOptions {
  std::string binary;             // Path of the executable (not searched in PATH).
  std::vector<std::string> args;  // Arguments after argv[0] (argv[0] = binary).
  std::string log_path;           // stdout + stderr; "" = inherit.
  bool append_log = false;        // Append to log_path instead of truncating it.
  std::vector<int> cpus;          // Cores to pin to; empty = inherit the parent's.
  pid_t process_group = 0;        // Group to join; 0 = lead a new group.
  int death_signal = 15;          // Sent to the child when the parent dies; 0 = none.
};

class ChildProcess {
 public:
  // Starts the child. Fails (and leaves no process behind) when the binary cannot be
  // executed, the log file cannot be opened or the cores cannot be set; the message
  // names the binary and the cause.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const ChildOptions& options);

  // Kills (SIGKILL) and reaps the child if it is still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  pid_t process_group() const { return pgid_; }

  // Reaps the child if it has exited (non-blocking). True once it has exited.
  bool Poll();
  bool exited() const { return exited_; }
  // "exited with code N" / "killed by signal N (NAME)" / "running".
  std::string ExitDescription() const;
  // Exit code when it exited normally; -1 otherwise.
  int exit_code() const;

  // Sends `signal` if the child is still running.
  void Signal(int signal);
  // Polls until the child exits or `timeout` passes. True when it has exited.
  bool WaitFor(absl::Duration timeout);

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  pid_t pgid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// The last `max_lines` lines (at most `max_bytes` bytes) of a text file; "" when it
// cannot be read.
std::string TailOfFile(const std::string& path, int max_lines = 20, size_t max_bytes = 8192);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_CHILD_PROCESS_H_
