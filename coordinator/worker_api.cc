#include "coordinator/worker_api.h"

namespace tandem::coordinator {

bool IsTransportFailure(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsAborted(s) ||
         absl::IsCancelled(s) || absl::IsUnknown(s);
}

}  // namespace tandem::coordinator
