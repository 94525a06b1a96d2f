// Engine: what a failed target call does to the phase's sequences (see engine.h for the
// failure model): re-prefill, pause while the group is unreachable, or end the batch's
// sequences when it rejected the step; and the record of a rejected batch.
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "coordinator/engine.h"

namespace tandem::coordinator {

void Engine::RecordRejectedBatch(const char* worker, const absl::Status& status,
                                 const std::string& shape) {
  rejected_batches_.fetch_add(1);
  LOG(ERROR) << "the " << worker << " worker rejected a batch the coordinator built (" << shape
             << "): " << status << " -- this is a coordinator bug; please report it";
  if (metrics_) metrics_->RecordRejectedBatch(worker, status.code());
  LOG_IF(FATAL, options_.strict_worker_batches)
      << "--strict_worker_batches: exiting on a rejected batch";
}

void Engine::OnTargetFailure(const absl::Status& status, const std::vector<Sequence*>& batch,
                             absl::Time now) {
  if (absl::IsNotFound(status)) {
    // The target lost these sequences (restarted): re-prefill them from scratch.
    LOG(WARNING) << "target lost sequences, re-prefilling: " << status;
    for (Sequence* s : batch) s->target_cached = 0;
    return;
  }
  if (IsTransportFailure(status)) {
    LOG(WARNING) << "target group unavailable, pausing " << running_.size()
                 << " sequences: " << status;
    target_available_ = false;
    for (auto& s : running_) {
      s->target_cached = 0;
      if (s->paused_since == absl::InfinitePast()) s->paused_since = now;
    }
    return;
  }
  // The worker rejected the step itself: end the sequences of that batch with the
  // reason instead of retrying forever.
  for (Sequence* s : batch) {
    s->Fail(absl::Status(
                absl::IsResourceExhausted(status) ? status.code() : absl::StatusCode::kInternal,
                absl::StrCat("target worker rejected the step: ", status.message())),
            now);
  }
}

}  // namespace tandem::coordinator
