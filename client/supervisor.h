// Supervision of a cluster's processes for `tandem up`: notices a process that died,
// restarts it after the RestartPolicy's backoff (or gives up when the policy or its
// budget says so), probes (re)started processes until they are healthy, and reports
// every event. Driven by the caller, one Step(now) at a time, over a ProcessTable
// (LocalCluster in `up`, a fake in tests), so it needs no threads and no real clock.
#ifndef TANDEM_CLIENT_SUPERVISOR_H_
#define TANDEM_CLIENT_SUPERVISOR_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/restart_policy.h"

namespace tandem::client {

// The processes a Supervisor drives; index i is stable for the table's life.
class ProcessTable {
 public:
  virtual ~ProcessTable() = default;
  virtual size_t size() const = 0;
  virtual std::string name(size_t i) const = 0;  // "coordinator", "draft", "target-1".
  virtual pid_t pid(size_t i) const = 0;         // Of the current incarnation.
  // Non-blocking: true once the current incarnation has exited (it is reaped).
  virtual bool Exited(size_t i) = 0;
  // How it ended: "exited with code 2", "killed by signal 9 (Killed)".
  virtual std::string ExitDescription(size_t i) const = 0;
  // Its log file ("" when none) and the last lines of it, for reports.
  virtual std::string LogPath(size_t i) const = 0;
  virtual std::string LogTail(size_t i) const = 0;
  // Health check of the current incarnation: OK = SERVING, else why not.
  virtual absl::Status Probe(size_t i) = 0;
  // Starts a new incarnation of process i (same command line) after it exited.
  virtual absl::Status Respawn(size_t i) = 0;
};

// kStarting: running, not yet SERVING; kServing: answered SERVING since it started;
// kBackoff: dead, restart scheduled; kFailed: dead for good (the cluster stops).
enum class ProcessState { kStarting, kServing, kBackoff, kFailed };
const char* ProcessStateName(ProcessState state);

struct ProcessStatus {
  std::string name;
  std::string role;  // coordinator, draft or target (the metrics label).
  ProcessState state = ProcessState::kStarting;
  pid_t pid = 0;
  int restarts = 0;       // Restarts since `up` started.
  std::string last_exit;  // ExitDescription of the last death, "" if none.
};

// "target-3" -> "target"; other names are their own role.
std::string RoleOfProcess(const std::string& name);

class Supervisor {
 public:
  // `table` must outlive the supervisor; every process is taken as just started.
  // `note` receives one line per event (healthy, died, restarting, restarted).
  Supervisor(ProcessTable* table, RestartPolicy policy,
             std::function<void(const std::string&)> note);

  // One round at `now`: reaps deaths and decides on each, starts the restarts that are
  // due, probes the processes not yet SERVING. OK, or FAILED_PRECONDITION when a dead
  // process is not restarted (policy, budget, or its restart failed); the message names
  // the process, how it ended, its restart count and the end of its log.
  absl::Status Step(absl::Time now);

  // Every process is SERVING.
  bool AllServing() const;
  // "name (last probe answer)" of the processes not SERVING, for a start-up timeout.
  std::vector<std::string> NotServing() const;
  // True (once) when a state, pid or count changed since the last call.
  bool TakeChanged();
  std::vector<ProcessStatus> Status() const;

 private:
  struct Entry {
    ProcessStatus status;
    RestartTracker tracker;
    absl::Time restart_at;
    std::string last_probe = "not asked yet";
  };
  absl::Status OnDeath(size_t i, absl::Time now);
  void Note(const std::string& line) const;

  ProcessTable* table_;
  std::function<void(const std::string&)> note_;
  std::vector<Entry> entries_;
  bool changed_ = true;
};

// Ready-file lines, one per process: "process=NAME state=STATE pid=P restarts=N".
std::string FormatProcessLines(const std::vector<ProcessStatus>& status);

// Prometheus text exposition of the statuses: tandem_up_restarts_total{role} (counter)
// and tandem_up_process_serving{process,role} (gauge, 1 = SERVING).
std::string FormatSupervisorMetrics(const std::vector<ProcessStatus>& status);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_SUPERVISOR_H_
