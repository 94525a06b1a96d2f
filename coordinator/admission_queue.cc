#include "coordinator/admission_queue.h"

#include "absl/strings/str_cat.h"

namespace tandem::coordinator {

absl::Status AdmissionQueueFullError(size_t capacity, absl::string_view limit_flag) {
  return absl::ResourceExhaustedError(
      absl::StrCat("server overloaded: the admission queue is full (", capacity,
                   " requests waiting, the limit); retry later, or raise the limit with ",
                   limit_flag, " on the coordinator"));
}

absl::Status AdmissionQueueDuplicateError(uint64_t id) {
  return absl::AlreadyExistsError(
      absl::StrCat("admission queue: an entry with id ", id, " is already queued"));
}

}  // namespace tandem::coordinator
