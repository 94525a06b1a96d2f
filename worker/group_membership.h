// Generations of a tensor-parallel target group, kept in the rendezvous store under
// the run id, so a group can re-form after a rank dies or restarts.
//
// Keys (all under the run id's prefix):
//   generation        the newest generation number, written by the leader: at start
//                     (a restarted leader reads the current value and writes +1) and
//                     each time it re-forms the group.
//   g<N>/...          the communicator of generation N (its own prefix, so nothing
//                     stale from an earlier generation is ever read).
//   joined/<N>/<R>    rank R is connecting to generation N (to name missing ranks).
//   formed/<N>        generation N formed (a newly started follower does not join a
//                     generation that formed without it; it waits for the next).
//   shutdown          the last generation the leader shut down cleanly; followers
//                     that were members of it exit instead of waiting.
//
// Thread-safe (the store is).
#ifndef TANDEM_WORKER_GROUP_MEMBERSHIP_H_
#define TANDEM_WORKER_GROUP_MEMBERSHIP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/factory.h"
#include "comm/store.h"

namespace tandem {
namespace worker {

class GroupMembership {
 public:
  // `options` describe this rank (backend, rank, size, hostname) and the rendezvous
  // source and run id; options.connect_timeout bounds the forming of one generation.
  static absl::StatusOr<std::unique_ptr<GroupMembership>> Open(const CommOptions& options);

  int rank() const { return options_.rank; }
  int size() const { return options_.size; }

  // The current "generation" value; nullopt when the key does not exist yet.
  absl::StatusOr<std::optional<uint64_t>> CurrentGeneration();
  // Leader: reads the current generation (0 when absent), writes it + 1 and returns it.
  absl::StatusOr<uint64_t> BeginNextGeneration();

  // Publishes joined/<N>/<rank>, then connects generation N's communicator (blocks up
  // to the connect timeout).
  absl::StatusOr<std::unique_ptr<Communicator>> Connect(uint64_t generation);
  // Ranks that have not published joined/<N>/<R>.
  std::vector<int> MissingRanks(uint64_t generation);

  absl::Status MarkFormed(uint64_t generation);
  bool IsFormed(uint64_t generation);
  absl::Status MarkShutdown(uint64_t generation);
  std::optional<uint64_t> ShutdownGeneration();

  // From `when` on, the store calls and the connecting of a generation (tcp) give up
  // with CANCELLED within a fraction of a second (store: rendezvous_address only)
  // instead of waiting out their budgets for ranks or a store that are gone; a shutting
  // down leader stops its forming attempt so. absl::InfiniteFuture() lifts it.
  void SetGiveUpTime(absl::Time when);

  // Follower: polls until the generation is greater than `after` (returns it), or
  // `give_up()` returns true (CANCELLED). Checks every `poll`.
  absl::StatusOr<uint64_t> WaitForGenerationAfter(std::optional<uint64_t> after,
                                                  const std::function<bool()>& give_up,
                                                  absl::Duration poll = absl::Milliseconds(100));

 private:
  GroupMembership(CommOptions options, std::shared_ptr<Store> store,
                  std::shared_ptr<std::atomic<int64_t>> give_up_at);
  std::optional<std::string> TryGet(const std::string& key);

  // Unix nanoseconds of SetGiveUpTime; shared with the predicate in options_.cancelled.
  std::shared_ptr<std::atomic<int64_t>> give_up_at_;
  CommOptions options_;
  std::shared_ptr<Store> store_;  // Scoped to the run id.
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_GROUP_MEMBERSHIP_H_
