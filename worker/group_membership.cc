#include "worker/group_membership.h"

#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tandem {
namespace worker {

absl::StatusOr<std::unique_ptr<GroupMembership>> GroupMembership::Open(const CommOptions& options) {
  auto give_up_at = std::make_shared<std::atomic<int64_t>>(std::numeric_limits<int64_t>::max());
  CommOptions with_give_up = options;
  with_give_up.cancelled = [give_up_at, outer = options.cancelled] {
    if (outer && outer()) return true;
    const int64_t at = give_up_at->load(std::memory_order_relaxed);
    return at != std::numeric_limits<int64_t>::max() && absl::ToUnixNanos(absl::Now()) >= at;
  };
  absl::StatusOr<std::shared_ptr<Store>> store = OpenRendezvousStore(with_give_up);
  if (!store.ok()) return store.status();
  return std::unique_ptr<GroupMembership>(
      new GroupMembership(std::move(with_give_up), *std::move(store), std::move(give_up_at)));
}

GroupMembership::GroupMembership(CommOptions options, std::shared_ptr<Store> store,
                                 std::shared_ptr<std::atomic<int64_t>> give_up_at)
    : give_up_at_(std::move(give_up_at)), options_(std::move(options)), store_(std::move(store)) {}

void GroupMembership::SetGiveUpTime(absl::Time when) {
  give_up_at_->store(when == absl::InfiniteFuture() ? std::numeric_limits<int64_t>::max()
                                                    : absl::ToUnixNanos(when),
                     std::memory_order_relaxed);
}

std::optional<std::string> GroupMembership::TryGet(const std::string& key) {
  absl::StatusOr<std::string> value = store_->GetOne(key, absl::ZeroDuration());
  if (!value.ok()) return std::nullopt;
  return *std::move(value);
}

absl::StatusOr<std::optional<uint64_t>> GroupMembership::CurrentGeneration() {
  std::optional<std::string> value = TryGet("generation");
  if (!value.has_value()) return std::optional<uint64_t>();
  uint64_t generation = 0;
  if (!absl::SimpleAtoi(*value, &generation)) {
    return absl::DataLossError(
        absl::StrCat("rendezvous store: key 'generation' holds '", *value, "', not a number"));
  }
  return std::optional<uint64_t>(generation);
}

absl::StatusOr<uint64_t> GroupMembership::BeginNextGeneration() {
  absl::StatusOr<std::optional<uint64_t>> current = CurrentGeneration();
  if (!current.ok()) return current.status();
  const uint64_t next = current->value_or(0) + 1;
  absl::Status status = store_->Set("generation", absl::StrCat(next));
  if (!status.ok()) return status;
  return next;
}

absl::StatusOr<std::unique_ptr<Communicator>> GroupMembership::Connect(uint64_t generation) {
  absl::Status status = store_->Set(absl::StrCat("joined/", generation, "/", options_.rank), "1");
  if (!status.ok()) return status;
  CommOptions options = options_;
  options.store = store_;
  options.rendezvous_address.clear();
  options.store_directory.clear();
  options.run_id = absl::StrCat("g", generation);
  return CreateCommunicator(options);
}

std::vector<int> GroupMembership::MissingRanks(uint64_t generation) {
  std::vector<int> missing;
  for (int r = 0; r < options_.size; ++r) {
    if (!TryGet(absl::StrCat("joined/", generation, "/", r)).has_value()) missing.push_back(r);
  }
  return missing;
}

absl::Status GroupMembership::MarkFormed(uint64_t generation) {
  return store_->Set(absl::StrCat("formed/", generation), "1");
}

bool GroupMembership::IsFormed(uint64_t generation) {
  return TryGet(absl::StrCat("formed/", generation)).has_value();
}

absl::Status GroupMembership::MarkShutdown(uint64_t generation) {
  return store_->Set("shutdown", absl::StrCat(generation));
}

std::optional<uint64_t> GroupMembership::ShutdownGeneration() {
  std::optional<std::string> value = TryGet("shutdown");
  uint64_t generation = 0;
  if (!value.has_value() || !absl::SimpleAtoi(*value, &generation)) return std::nullopt;
  return generation;
}

absl::StatusOr<uint64_t> GroupMembership::WaitForGenerationAfter(
    std::optional<uint64_t> after, const std::function<bool()>& give_up, absl::Duration poll) {
  while (true) {
    absl::StatusOr<std::optional<uint64_t>> current = CurrentGeneration();
    if (current.ok() && current->has_value() && (!after.has_value() || **current > *after)) {
      return **current;
    }
    if (give_up()) return absl::CancelledError("stopped waiting for a group generation");
    absl::SleepFor(poll);
  }
}

}  // namespace worker
}  // namespace tandem
