#include "client/local_cluster.h"

#include <signal.h>

#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
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
    absl::StatusOr<std::unique_ptr<ChildProcess>> child = cluster->SpawnOne(spec, false);
    if (!child.ok()) {
      cluster->Stop();
      return child.status();
    }
    if (cluster->pgid_ == 0) cluster->pgid_ = (*child)->process_group();
    cluster->children_.push_back(*std::move(child));
  }
  return cluster;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> LocalCluster::SpawnOne(const ProcessSpec& spec,
                                                                     bool append) {
  ChildOptions o;
  o.binary = spec.binary;
  o.args = spec.args;
  o.log_path = spec.log_path;
  o.append_log = append;
  o.cpus = spec.cpus;
  o.process_group = pgid_;
  o.death_signal = SIGTERM;
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(o);
  if (!child.ok()) {
    return absl::Status(child.status().code(),
                        absl::StrCat(spec.name, ": ", child.status().message()));
  }
  return child;
}

LocalCluster::~LocalCluster() { Stop(); }

std::string LocalCluster::ExitDescription(size_t i) const {
  return children_[i]->ExitDescription();
}

std::string LocalCluster::LogTail(size_t i) const {
  return specs_[i].log_path.empty() ? "" : TailOfFile(specs_[i].log_path, 15);
}

absl::Status LocalCluster::Probe(size_t i) { return options_.probe(specs_[i].health_address); }

absl::Status LocalCluster::Respawn(size_t i) {
  if (stopped_) return absl::FailedPreconditionError("the cluster is stopped");
  if (!children_[i]->Poll()) {
    return absl::FailedPreconditionError(absl::StrCat(specs_[i].name, " is still running"));
  }
  if (!specs_[i].log_path.empty()) {
    std::ofstream(specs_[i].log_path, std::ios::app)
        << "--- tandem up: restarting " << specs_[i].name << " (the previous one "
        << children_[i]->ExitDescription() << ") ---\n";
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = SpawnOne(specs_[i], true);
  if (!child.ok()) return child.status();
  children_[i] = *std::move(child);
  return absl::OkStatus();
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
