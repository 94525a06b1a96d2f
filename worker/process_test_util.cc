#include "worker/process_test_util.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"

extern char** environ;

namespace tandem {
namespace worker {
namespace testing {

std::string WorkerBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/tandem/worker/tandem-worker");
}

std::string TestTempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::string& binary, const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  std::string path = binary;
  argv.push_back(path.data());
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", path, ": error ", err));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, log_path));
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

void ChildProcess::Signal(int signal) {
  if (!reaped_) kill(pid_, signal);
}

int ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!reaped_) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
    }
    if (absl::Now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      reaped_ = true;
      return -1;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return -3;
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

double ChildProcess::CpuSeconds() const {
  std::ifstream in(absl::StrCat("/proc/", pid_, "/stat"));
  std::string line;
  std::getline(in, line);
  // Fields after the command name (which may hold spaces) start after ") ".
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> fields = absl::StrSplit(line.substr(close + 2), ' ');
  if (fields.size() < 13) return -1;
  // utime and stime are fields 14 and 15 of the whole line: 11 and 12 here.
  const double ticks = std::stod(fields[11]) + std::stod(fields[12]);
  return ticks / sysconf(_SC_CLK_TCK);
}

std::string ChildProcess::LogTail(size_t bytes) const {
  std::ifstream in(log_path_);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string all = buffer.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

Health CheckHealth(const std::string& address, const std::string& service) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return Health::kUnknownService;
  if (!status.ok()) return Health::kUnreachable;
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? Health::kServing
                                                                             : Health::kNotServing;
}

bool WaitForHealth(const std::string& address, Health want, absl::Duration timeout,
                   const std::string& service) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (CheckHealth(address, service) == want) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

std::unique_ptr<v1::Worker::Stub> WorkerStub(const std::string& address) {
  return v1::Worker::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

absl::StatusOr<std::unique_ptr<WorkerGroup>> WorkerGroup::Start(
    const std::string& model_dir, int tp, const std::string& tag,
    const std::vector<std::string>& extra_flags, const std::string& binary,
    const std::string& log_dir) {
  std::unique_ptr<WorkerGroup> group(new WorkerGroup());
  group->binary_ = binary;
  group->log_dir_ = log_dir;
  group->model_dir_ = model_dir;
  group->tag_ = absl::StrCat(tag, "-", getpid());
  group->store_dir_ = absl::StrCat(log_dir, "/rdv-", group->tag_);
  group->extra_flags_ = extra_flags;
  for (int r = 0; r < tp; ++r) {
    const int port = FreePort();
    if (port == 0) return absl::InternalError("no free port");
    group->ports_.push_back(port);
  }
  group->starts_.assign(tp, 0);
  group->processes_.resize(tp);
  for (int r = 0; r < tp; ++r) {
    absl::Status status = group->Restart(r);
    if (!status.ok()) return status;
  }
  return group;
}

std::string WorkerGroup::address(int rank) const {
  return absl::StrCat("127.0.0.1:", ports_[rank]);
}

std::vector<std::string> WorkerGroup::Args(int rank) const {
  std::vector<std::string> args = {
      "--role=target",
      model_dir_.rfind("synthetic:", 0) == 0 ? "--synthetic=" + model_dir_.substr(10)
                                             : "--model_dir=" + model_dir_,
      absl::StrCat("--rank=", rank),
      absl::StrCat("--tp_size=", size()),
      "--listen=" + address(rank),
      "--threads=1",
  };
  if (size() > 1) {
    bool own_rendezvous = false;
    for (const std::string& flag : extra_flags_) {
      own_rendezvous |= flag.rfind("--rendezvous=", 0) == 0;
    }
    if (!own_rendezvous) args.push_back("--rendezvous_dir=" + store_dir_);
    args.push_back("--run_id=" + tag_);
    args.push_back("--hostname=127.0.0.1");
  }
  args.insert(args.end(), extra_flags_.begin(), extra_flags_.end());
  return args;
}

absl::Status WorkerGroup::Restart(int rank) {
  processes_[rank].reset();
  const std::string log =
      absl::StrCat(log_dir_, "/", tag_, "-rank", rank, "-", starts_[rank]++, ".log");
  auto process = ChildProcess::Start(binary_, Args(rank), log);
  if (!process.ok()) return process.status();
  processes_[rank] = *std::move(process);
  return absl::OkStatus();
}

std::string WorkerGroup::Logs() const {
  std::string out;
  for (int r = 0; r < size(); ++r) {
    if (processes_[r] == nullptr) continue;
    absl::StrAppend(&out, "---- rank ", r, " (", processes_[r]->log_path(), ")\n",
                    processes_[r]->LogTail(3000), "\n");
  }
  return out;
}

}  // namespace testing
}  // namespace worker
}  // namespace tandem
