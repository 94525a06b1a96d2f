// Supervises the processes of a local cluster (`tandem up`): starts them in one
// process group, waits until each reports healthy over grpc.health.v1, notices a
// process that dies, and stops everything in order (coordinator first, so it drains),
// escalating to SIGKILL. No process outlives Stop() or the destructor.
#ifndef TANDEM_CLIENT_LOCAL_CLUSTER_H_
#define TANDEM_CLIENT_LOCAL_CLUSTER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/child_process.h"
#include "client/cluster_plan.h"

namespace tandem::client {

struct LocalClusterOptions {
  // Time each stop stage is allowed for a clean exit after SIGTERM; then SIGKILL.
  absl::Duration stop_grace = absl::Seconds(10);
  // Health probe of one address; default: CheckServing with a 1 s deadline.
  std::function<absl::Status(const std::string& address)> probe;
  // Receives progress lines ("target-1 is healthy"); may be empty.
  std::function<void(const std::string& line)> note;
};

class LocalCluster {
 public:
  // Starts `processes` in order, all in one new process group, each with a death
  // signal tied to this process. If one cannot start, the others are stopped and the
  // error names it.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(std::vector<ProcessSpec> processes,
                                                             LocalClusterOptions options);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Waits until every process answers SERVING. Between polling rounds it calls
  // `wait(interval)`, which sleeps and returns true to give up (a signal arrived):
  // CANCELLED. A process that exits first: FAILED_PRECONDITION with its report (see
  // ExitReport). Past `timeout`: DEADLINE_EXCEEDED naming the processes not healthy.
  absl::Status WaitHealthy(absl::Duration timeout, const std::function<bool(absl::Duration)>& wait);

  // Report of a process that has exited and was not reported before, else nullopt.
  std::optional<std::string> FindExited();

  // Orderly stop, stage by stage (ProcessSpec::stop_stage, ascending): SIGTERM to the
  // stage's processes and up to stop_grace for them to exit; then SIGKILL to whatever is
  // left in the whole group (each such process is noted); every child reaped.
  // Idempotent.
  void Stop();

  std::vector<pid_t> pids() const;
  pid_t process_group() const { return pgid_; }
  const std::vector<ProcessSpec>& processes() const { return specs_; }

 private:
  LocalCluster() = default;
  // "NAME (pid P) DESCRIPTION; last lines of LOG: ..." for process i.
  std::string ExitReport(size_t i) const;

  std::vector<ProcessSpec> specs_;
  std::vector<std::unique_ptr<ChildProcess>> children_;
  std::vector<bool> reported_;
  LocalClusterOptions options_;
  pid_t pgid_ = 0;
  bool stopped_ = false;
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_LOCAL_CLUSTER_H_
