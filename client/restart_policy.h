// When `tandem up` restarts a process that died, like a process supervisor: an
// exponential backoff between restarts and a budget of restarts per sliding window.
// Pure (the caller passes the time), so it is tested with a fake clock.
#ifndef TANDEM_CLIENT_RESTART_POLICY_H_
#define TANDEM_CLIENT_RESTART_POLICY_H_

#include <deque>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::client {

// Which processes are restarted: none (a death stops the cluster), the workers only (a
// coordinator death stops it), or every process (default).
enum class RestartMode { kNever, kWorkers, kAlways };

// "never" | "workers" | "always"; anything else: INVALID_ARGUMENT naming the value.
absl::StatusOr<RestartMode> ParseRestartMode(const std::string& text);
std::string RestartModeName(RestartMode mode);

struct RestartPolicy {
  RestartMode mode = RestartMode::kAlways;
  // Restarts allowed per process within `window`; one more death gives up.
  int budget = 5;
  absl::Duration window = absl::Seconds(60);
  // Delay of the first restart in a window; each further restart in the window doubles
  // it, up to `max_backoff`.
  absl::Duration backoff = absl::Milliseconds(500);
  absl::Duration max_backoff = absl::Seconds(10);
};

// Checks the ranges: budget >= 0, window > 0, 0 <= backoff <= max_backoff.
absl::Status ValidateRestartPolicy(const RestartPolicy& policy);

// The restart history of one process.
class RestartTracker {
 public:
  explicit RestartTracker(RestartPolicy policy) : policy_(policy) {}

  struct Decision {
    bool restart = false;        // false: give up (mode excludes it, or budget spent).
    absl::Duration delay;        // Wait before the restart (when restart).
    int restarts_in_window = 0;  // Restarts within the window before this death.
  };

  // The process died at `now`. `is_coordinator` matters for RestartMode::kWorkers. A
  // decision to restart is recorded as a restart at `now` (it counts against the
  // budget from then on).
  Decision OnExit(absl::Time now, bool is_coordinator);

  int total_restarts() const { return total_; }
  const RestartPolicy& policy() const { return policy_; }

 private:
  RestartPolicy policy_;
  std::deque<absl::Time> recent_;  // Restart times within the window, oldest first.
  int total_ = 0;
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_RESTART_POLICY_H_
