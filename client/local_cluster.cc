#include "client/local_cluster.h"

#include <signal.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "client/health.h"

namespace tandem::client {

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    std::vector<ProcessSpec> processes, LocalClusterOptions options) {
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
  if (!options.probe) {
    options.probe = [](const std::string& address) {
      return CheckServing(address, absl::Seconds(1));
    };
  }
  cluster->options_ = std::move(options);
  cluster->specs_ = std::move(processes);
  for (const ProcessSpec& spec : cluster->specs_) {
    ChildOptions o;
    o.binary = spec.binary;
    o.args = spec.args;
    o.log_path = spec.log_path;
    o.cpus = spec.cpus;
    o.process_group = cluster->pgid_;
    o.death_signal = SIGTERM;
    absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(o);
    if (!child.ok()) {
      cluster->Stop();
      return absl::Status(child.status().code(),
                          absl::StrCat(spec.name, ": ", child.status().message()));
    }
    if (cluster->pgid_ == 0) cluster->pgid_ = (*child)->process_group();
    cluster->children_.push_back(*std::move(child));
    cluster->reported_.push_back(false);
  }
  return cluster;
}

LocalCluster::~LocalCluster() { Stop(); }

std::string LocalCluster::ExitReport(size_t i) const {
  const ProcessSpec& spec = specs_[i];
  std::string report =
      absl::StrCat(spec.name, " (pid ", children_[i]->pid(), ") ", children_[i]->ExitDescription());
  if (!spec.log_path.empty()) {
    const std::string tail = TailOfFile(spec.log_path, 15);
    absl::StrAppend(&report, "; last lines of ", spec.log_path, ":\n  ",
                    absl::StrReplaceAll(tail.empty() ? "(empty)" : tail, {{"\n", "\n  "}}));
  }
  return report;
}

std::optional<std::string> LocalCluster::FindExited() {
  for (size_t i = 0; i < children_.size(); ++i) {
    if (!reported_[i] && children_[i]->Poll()) {
      reported_[i] = true;
      return ExitReport(i);
    }
  }
  return std::nullopt;
}

absl::Status LocalCluster::WaitHealthy(absl::Duration timeout,
                                       const std::function<bool(absl::Duration)>& wait) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<bool> healthy(children_.size(), false);
  std::vector<std::string> last_answer(children_.size(), "not asked yet");
  while (true) {
    if (std::optional<std::string> dead = FindExited()) {
      return absl::FailedPreconditionError(*dead);
    }
    bool all = true;
    for (size_t i = 0; i < children_.size(); ++i) {
      if (healthy[i]) continue;
      absl::Status s = options_.probe(specs_[i].health_address);
      if (s.ok()) {
        healthy[i] = true;
        if (options_.note) options_.note(absl::StrCat(specs_[i].name, " is healthy"));
      } else {
        all = false;
        last_answer[i] = std::string(s.message());
      }
    }
    if (all) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      std::vector<std::string> waiting;
      for (size_t i = 0; i < children_.size(); ++i) {
        if (!healthy[i]) waiting.push_back(absl::StrCat(specs_[i].name, " (", last_answer[i], ")"));
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "not healthy after ", absl::FormatDuration(timeout), ": ", absl::StrJoin(waiting, ", ")));
    }
    if (wait(absl::Milliseconds(250))) return absl::CancelledError("interrupted");
  }
}

void LocalCluster::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (children_.empty()) return;
  std::set<int> stages;
  for (const ProcessSpec& spec : specs_) stages.insert(spec.stop_stage);
  for (int stage : stages) {
    for (size_t i = 0; i < children_.size(); ++i) {
      if (specs_[i].stop_stage == stage) children_[i]->Signal(SIGTERM);
    }
    const absl::Time end = absl::Now() + options_.stop_grace;
    for (size_t i = 0; i < children_.size(); ++i) {
      if (specs_[i].stop_stage == stage) {
        children_[i]->WaitFor(std::max(absl::ZeroDuration(), end - absl::Now()));
      }
    }
  }
  bool any_left = false;
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i]->Poll()) continue;
    any_left = true;
    if (options_.note) {
      options_.note(
          absl::StrCat(specs_[i].name, " (pid ", children_[i]->pid(), ") did not exit within ",
                       absl::FormatDuration(options_.stop_grace), " of SIGTERM; killing it"));
    }
  }
  // The group exists while a member lives; kill it whole (and anything they spawned).
  if (any_left && pgid_ > 0) kill(-pgid_, SIGKILL);
  for (auto& child : children_) {
    child->Signal(SIGKILL);
    child->WaitFor(absl::Seconds(10));
  }
}

std::vector<pid_t> LocalCluster::pids() const {
  std::vector<pid_t> out;
  for (const auto& child : children_) out.push_back(child->pid());
  return out;
}

}  // namespace tandem::client
