#include "client/restart_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem::client {

absl::StatusOr<RestartMode> ParseRestartMode(const std::string& text) {
  if (text == "never") return RestartMode::kNever;
  if (text == "workers") return RestartMode::kWorkers;
  if (text == "always") return RestartMode::kAlways;
  return absl::InvalidArgumentError(
      absl::StrCat("restart policy must be never, workers or always, got '", text, "'"));
}

std::string RestartModeName(RestartMode mode) {
  switch (mode) {
    case RestartMode::kNever:
      return "never";
    case RestartMode::kWorkers:
      return "workers";
    case RestartMode::kAlways:
      break;
  }
  return "always";
}

absl::Status ValidateRestartPolicy(const RestartPolicy& p) {
  if (p.budget < 0) {
    return absl::InvalidArgumentError(absl::StrCat("restart.budget must be >= 0, got ", p.budget));
  }
  if (p.window <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("restart.window_s must be > 0");
  }
  if (p.backoff < absl::ZeroDuration() || p.max_backoff < p.backoff) {
    return absl::InvalidArgumentError("restart: need 0 <= backoff_s <= max_backoff_s");
  }
  return absl::OkStatus();
}

RestartTracker::Decision RestartTracker::OnExit(absl::Time now, bool is_coordinator) {
  while (!recent_.empty() && recent_.front() <= now - policy_.window) recent_.pop_front();
  Decision d;
  d.restarts_in_window = static_cast<int>(recent_.size());
  const bool covered = policy_.mode == RestartMode::kAlways ||
                       (policy_.mode == RestartMode::kWorkers && !is_coordinator);
  if (!covered || d.restarts_in_window >= policy_.budget) return d;
  d.restart = true;
  // backoff * 2^n, capped (the shift is bounded so it cannot overflow).
  const int doublings = std::min(d.restarts_in_window, 30);
  d.delay = std::min(policy_.max_backoff, policy_.backoff * static_cast<double>(1 << doublings));
  recent_.push_back(now);
  ++total_;
  return d;
}

}  // namespace tandem::client
