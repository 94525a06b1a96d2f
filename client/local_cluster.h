// The processes of a local cluster (`tandem up`): starts them in one process group with
// a death signal tied to this process, restarts one on request (same command line, its
// log appended to), and stops everything in order (coordinator first, so it drains),
// escalating to SIGKILL. No process outlives Stop() or the destructor. It is the
// ProcessTable a Supervisor drives (deaths, restarts, health probes).
#ifndef TANDEM_CLIENT_LOCAL_CLUSTER_H_
#define TANDEM_CLIENT_LOCAL_CLUSTER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/child_process.h"
#include "client/cluster_plan.h"
#include "client/supervisor.h"

namespace tandem::client {

struct LocalClusterOptions {
  // Time each stop stage is allowed for a clean exit after SIGTERM; then SIGKILL.
  absl::Duration stop_grace = absl::Seconds(10);
  // Health probe of one address; default: CheckServing with a 1 s deadline.
  std::function<absl::Status(const std::string& address)> probe;
  // Receives progress lines (processes killed at Stop); may be empty.
  std::function<void(const std::string& line)> note;
};

class LocalCluster : public ProcessTable {
 public:
  // Starts `processes` in order, all in one new process group, each with a death
  // signal tied to this process. If one cannot start, the others are stopped and the
  // error names it.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(std::vector<ProcessSpec> processes,
                                                             LocalClusterOptions options);
  ~LocalCluster() override;
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // ProcessTable. Respawn(i) requires process i to have exited; the new incarnation
  // joins the cluster's process group (its own group if that one is gone) and appends
  // to the log after a line "--- tandem up: restarting NAME ---". Call from the thread
  // that called Start (the death signal follows the forking thread).
  size_t size() const override { return specs_.size(); }
  std::string name(size_t i) const override { return specs_[i].name; }
  pid_t pid(size_t i) const override { return children_[i]->pid(); }
  bool Exited(size_t i) override { return children_[i]->Poll(); }
  std::string ExitDescription(size_t i) const override;
  std::string LogPath(size_t i) const override { return specs_[i].log_path; }
  std::string LogTail(size_t i) const override;
  absl::Status Probe(size_t i) override;
  absl::Status Respawn(size_t i) override;

  // Orderly stop, stage by stage (ProcessSpec::stop_stage, ascending): SIGTERM to the
  // stage's processes and up to stop_grace for them to exit; then SIGKILL to whatever is
  // left in the whole group (each such process is noted); every child reaped.
  // Idempotent.
  void Stop();

  std::vector<pid_t> pids() const;  // Current incarnations, in start order.
  pid_t process_group() const { return pgid_; }
  const std::vector<ProcessSpec>& processes() const { return specs_; }

 private:
  LocalCluster() = default;
  absl::StatusOr<std::unique_ptr<ChildProcess>> SpawnOne(const ProcessSpec& spec, bool append);

  std::vector<ProcessSpec> specs_;
  std::vector<std::unique_ptr<ChildProcess>> children_;
  LocalClusterOptions options_;
  pid_t pgid_ = 0;
  bool stopped_ = false;
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_LOCAL_CLUSTER_H_
