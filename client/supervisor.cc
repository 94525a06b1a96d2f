#include "client/supervisor.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace tandem::client {

const char* ProcessStateName(ProcessState state) {
  switch (state) {
    case ProcessState::kStarting:
      return "starting";
    case ProcessState::kServing:
      return "serving";
    case ProcessState::kBackoff:
      return "restarting";
    case ProcessState::kFailed:
      break;
  }
  return "failed";
}

std::string RoleOfProcess(const std::string& name) {
  return absl::StartsWith(name, "target-") ? "target" : name;
}

Supervisor::Supervisor(ProcessTable* table, RestartPolicy policy,
                       std::function<void(const std::string&)> note)
    : table_(table), note_(std::move(note)) {
  for (size_t i = 0; i < table_->size(); ++i) {
    Entry e{ProcessStatus{}, RestartTracker(policy), absl::InfinitePast()};
    e.status.name = table_->name(i);
    e.status.role = RoleOfProcess(e.status.name);
    e.status.pid = table_->pid(i);
    entries_.push_back(std::move(e));
  }
}

void Supervisor::Note(const std::string& line) const {
  if (note_) note_(line);
}

absl::Status Supervisor::OnDeath(size_t i, absl::Time now) {
  Entry& e = entries_[i];
  changed_ = true;
  e.status.last_exit = table_->ExitDescription(i);
  const RestartPolicy& policy = e.tracker.policy();
  const RestartTracker::Decision d = e.tracker.OnExit(now, e.status.role == "coordinator");
  const std::string who =
      absl::StrCat(e.status.name, " (pid ", e.status.pid, ") ", e.status.last_exit);
  if (d.restart) {
    e.status.state = ProcessState::kBackoff;
    e.status.restarts = e.tracker.total_restarts();
    e.restart_at = now + d.delay;
    Note(absl::StrCat(who, "; restarting it in ", absl::FormatDuration(d.delay), " (restart ",
                      e.status.restarts, "; ", d.restarts_in_window + 1, " of ", policy.budget,
                      " allowed within ", absl::FormatDuration(policy.window), ")"));
    return absl::OkStatus();
  }
  e.status.state = ProcessState::kFailed;
  std::string why;
  if (policy.mode == RestartMode::kNever) {
    why = "the restart policy is 'never'";
  } else if (policy.mode == RestartMode::kWorkers && e.status.role == "coordinator") {
    why = "the restart policy 'workers' does not restart the coordinator";
  } else {
    why = absl::StrCat("restart budget exhausted: restarted ", d.restarts_in_window,
                       " times within ", absl::FormatDuration(policy.window), " (budget ",
                       policy.budget, "), ", e.status.restarts, " restarts in all");
  }
  std::string report = absl::StrCat(who, "; not restarted: ", why);
  const std::string path = table_->LogPath(i);
  if (!path.empty()) {
    const std::string tail = table_->LogTail(i);
    absl::StrAppend(&report, "; last lines of ", path, ":\n  ",
                    absl::StrReplaceAll(tail.empty() ? "(empty)" : tail, {{"\n", "\n  "}}));
  }
  return absl::FailedPreconditionError(report);
}

absl::Status Supervisor::Step(absl::Time now) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.status.state == ProcessState::kFailed) continue;
    if (e.status.state == ProcessState::kBackoff) {
      if (now < e.restart_at) continue;
      changed_ = true;
      if (absl::Status s = table_->Respawn(i); !s.ok()) {
        e.status.state = ProcessState::kFailed;
        return absl::FailedPreconditionError(
            absl::StrCat("cannot restart ", e.status.name, ": ", s.message()));
      }
      e.status.state = ProcessState::kStarting;
      e.status.pid = table_->pid(i);
      e.last_probe = "not asked yet";
      Note(absl::StrCat("restarted ", e.status.name, " (pid ", e.status.pid, ", restart ",
                        e.status.restarts, ")"));
      continue;  // Probed from the next round on.
    }
    if (table_->Exited(i)) {
      if (absl::Status s = OnDeath(i, now); !s.ok()) return s;
      continue;
    }
    if (e.status.state == ProcessState::kStarting) {
      absl::Status probe = table_->Probe(i);
      if (probe.ok()) {
        e.status.state = ProcessState::kServing;
        changed_ = true;
        Note(absl::StrCat(e.status.name, " is healthy"));
      } else {
        e.last_probe = std::string(probe.message());
      }
    }
  }
  return absl::OkStatus();
}

bool Supervisor::AllServing() const {
  for (const Entry& e : entries_) {
    if (e.status.state != ProcessState::kServing) return false;
  }
  return true;
}

std::vector<std::string> Supervisor::NotServing() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) {
    if (e.status.state == ProcessState::kServing) continue;
    out.push_back(absl::StrCat(
        e.status.name, " (",
        e.status.state == ProcessState::kStarting ? e.last_probe : ProcessStateName(e.status.state),
        ")"));
  }
  return out;
}

bool Supervisor::TakeChanged() {
  const bool changed = changed_;
  changed_ = false;
  return changed;
}

std::vector<ProcessStatus> Supervisor::Status() const {
  std::vector<ProcessStatus> out;
  for (const Entry& e : entries_) out.push_back(e.status);
  return out;
}

std::string FormatProcessLines(const std::vector<ProcessStatus>& status) {
  std::string out;
  for (const ProcessStatus& p : status) {
    absl::StrAppend(&out, "process=", p.name, " state=", ProcessStateName(p.state), " pid=", p.pid,
                    " restarts=", p.restarts, "\n");
  }
  return out;
}

std::string FormatSupervisorMetrics(const std::vector<ProcessStatus>& status) {
  std::map<std::string, int> restarts;  // Sorted by role, every role present.
  for (const ProcessStatus& p : status) restarts[p.role] += p.restarts;
  std::string out =
      "# HELP tandem_up_restarts_total Processes restarted by tandem up after they died.\n"
      "# TYPE tandem_up_restarts_total counter\n";
  for (const auto& [role, n] : restarts) {
    absl::StrAppend(&out, "tandem_up_restarts_total{role=\"", role, "\"} ", n, "\n");
  }
  absl::StrAppend(&out,
                  "# HELP tandem_up_process_serving 1 when the process answers SERVING, else 0.\n"
                  "# TYPE tandem_up_process_serving gauge\n");
  for (const ProcessStatus& p : status) {
    absl::StrAppend(&out, "tandem_up_process_serving{process=\"", p.name, "\",role=\"", p.role,
                    "\"} ", p.state == ProcessState::kServing ? 1 : 0, "\n");
  }
  return out;
}

}  // namespace tandem::client
