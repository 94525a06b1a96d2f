#include "client/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace tandem::client {
namespace {

// Child side of Spawn: only async-signal-safe calls until exec. On failure writes
// `step` and errno to the status pipe and exits 127.
[[noreturn]] void ExecChild(const ChildOptions& o, char* const* argv, int log_fd, int status_fd,
                            pid_t parent, const cpu_set_t* cpus) {
  auto fail = [status_fd](int step) {
    int msg[2] = {step, errno};
    ssize_t ignored = write(status_fd, msg, sizeof(msg));
    (void)ignored;
    _exit(127);
  };
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  if (o.death_signal != 0) {
    if (prctl(PR_SET_PDEATHSIG, o.death_signal) != 0) fail(1);
    if (getppid() != parent) _exit(127);  // The parent already died.
  }
  if (setpgid(0, o.process_group) != 0 && setpgid(0, 0) != 0) fail(2);
  if (cpus != nullptr && sched_setaffinity(0, sizeof(cpu_set_t), cpus) != 0) fail(3);
  if (log_fd >= 0) {
    if (dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0) fail(4);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  }
  execv(o.binary.c_str(), argv);
  fail(5);
  _exit(127);
}

const char* StepName(int step) {
  switch (step) {
    case 1:
      return "prctl(PR_SET_PDEATHSIG)";
    case 2:
      return "setpgid";
    case 3:
      return "sched_setaffinity";
    case 4:
      return "redirecting output";
    default:
      return "exec";
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(const ChildOptions& o) {
  if (access(o.binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot execute ", o.binary, ": ", strerror(errno)));
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : o.cpus) {
    if (c < 0 || c >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat("CPU ", c, " is out of range"));
    }
    CPU_SET(c, &cpus);
  }
  int log_fd = -1;
  if (!o.log_path.empty()) {
    log_fd = open(o.log_path.c_str(),
                  O_WRONLY | O_CREAT | O_CLOEXEC | (o.append_log ? O_APPEND : O_TRUNC), 0644);
    if (log_fd < 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot open log file ", o.log_path, ": ", strerror(errno)));
    }
  }
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    if (log_fd >= 0) close(log_fd);
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  std::vector<std::string> strings = {o.binary};
  strings.insert(strings.end(), o.args.begin(), o.args.end());
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(status_pipe[0]);
    close(status_pipe[1]);
    if (log_fd >= 0) close(log_fd);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", strerror(err)));
  }
  if (pid == 0) {
    close(status_pipe[0]);
    ExecChild(o, argv.data(), log_fd, status_pipe[1], parent, o.cpus.empty() ? nullptr : &cpus);
  }
  // Parent. Setting the group here too closes the race with the child's own call.
  const pid_t pgid = o.process_group == 0 ? pid : o.process_group;
  setpgid(pid, pgid);
  close(status_pipe[1]);
  if (log_fd >= 0) close(log_fd);
  int msg[2] = {0, 0};
  ssize_t n;
  do {
    n = read(status_pipe[0], msg, sizeof(msg));
  } while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->pgid_ = getpgid(pid) > 0 ? getpgid(pid) : pgid;
  if (n == static_cast<ssize_t>(sizeof(msg))) {
    child->WaitFor(absl::Seconds(5));
    return absl::InternalError(
        absl::StrCat("starting ", o.binary, ": ", StepName(msg[0]), " failed: ", strerror(msg[1])));
  }
  return child;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !Poll()) {
    kill(pid_, SIGKILL);
    WaitFor(absl::Seconds(10));
  }
}

bool ChildProcess::Poll() {
  if (exited_) return true;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    status_ = status;
  } else if (r < 0 && errno == ECHILD) {
    exited_ = true;  // Reaped elsewhere; the status is unknown.
    status_ = 0;
  }
  return exited_;
}

std::string ChildProcess::ExitDescription() const {
  if (!exited_) return "running";
  if (WIFEXITED(status_)) return absl::StrCat("exited with code ", WEXITSTATUS(status_));
  if (WIFSIGNALED(status_)) {
    const int sig = WTERMSIG(status_);
    return absl::StrCat("killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return absl::StrCat("ended with status ", status_);
}

int ChildProcess::exit_code() const {
  return exited_ && WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
}

void ChildProcess::Signal(int signal) {
  if (!Poll()) kill(pid_, signal);
}

bool ChildProcess::WaitFor(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!Poll()) {
    if (absl::Now() >= end) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

std::string TailOfFile(const std::string& path, int max_lines, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes)
                                   ? size - static_cast<std::streamoff>(max_bytes)
                                   : 0;
  in.seekg(start);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines = absl::StrSplit(text.str(), '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());  // Partial first line.
  if (static_cast<int>(lines.size()) > max_lines) {
    lines.erase(lines.begin(), lines.end() - max_lines);
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace tandem::client
