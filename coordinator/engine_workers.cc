// Engine: its workers as it sees them — their description at start-up (limits, KV
// capacity, the target leader's methods) and the monitor that notices a worker coming
// back and schedules the resets (docs/architecture.md §8).
#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/engine.h"

namespace tandem::coordinator {

absl::Status Engine::DescribeWorkers(absl::Time give_up, const std::function<bool()>& cancelled) {
  for (;;) {
    if (cancelled && cancelled()) return absl::CancelledError("start-up cancelled");
    absl::StatusOr<v1::DescribeResponse> d = target_->Describe();
    if (d.ok() && target_->IsServing()) {
      ApplyTargetDescription(*d);
      // The target leader's proposers (Medusa) are served from here on: before Start,
      // so no sequence holds a proposer of the registry replaced.
      std::vector<v1::SpeculationMethod> leader_methods;
      for (int m : d->target_methods()) {
        leader_methods.push_back(static_cast<v1::SpeculationMethod>(m));
      }
      ServeProposers(leader_methods);
      break;
    }
    if (absl::Now() > give_up) {
      return absl::UnavailableError(absl::StrCat(
          "target worker ", target_->address(),
          " not ready: ", d.ok() ? "not serving yet" : std::string(d.status().message())));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  if (draft_ == nullptr) return absl::OkStatus();
  {
    absl::MutexLock lock(&cluster_mu_);
    cluster_.has_draft = true;
  }
  kv_.SetDraft({}, true);
  for (;;) {
    if (cancelled && cancelled()) return absl::CancelledError("start-up cancelled");
    absl::StatusOr<v1::DescribeResponse> d = draft_->Describe();
    if (d.ok() && draft_->IsServing()) {
      ApplyDraftDescription(*d);
      draft_available_ = true;
      return absl::OkStatus();
    }
    if (absl::Now() > give_up) {
      // Serving without the draft is allowed: the monitor describes it when it comes up.
      LOG(WARNING) << "draft worker " << draft_->address()
                   << " not ready; starting without speculation from the draft";
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

void Engine::ApplyTargetDescription(const v1::DescribeResponse& d) {
  {
    absl::MutexLock lock(&cluster_mu_);
    cluster_.target = d;
  }
  target_instance_ = d.instance_id();
  planner_.target_max_batch_tokens = d.max_batch_tokens();
  planner_.context_length = std::min<int>(options_.planner.context_length, d.context_length());
  planner_.max_k = std::min<int>(options_.planner.max_k, d.max_speculative_tokens());
  planner_.max_tree_nodes = d.max_speculative_tokens();
  kv_.SetTarget({static_cast<int>(d.kv_block_size()), static_cast<int>(d.kv_total_blocks())});
}

void Engine::ApplyDraftDescription(const v1::DescribeResponse& d) {
  {
    absl::MutexLock lock(&cluster_mu_);
    cluster_.draft = d;
    cluster_.draft_described = true;
  }
  if (d.max_batch_tokens() > 0) planner_.draft_max_batch_tokens = d.max_batch_tokens();
  if (d.max_speculative_tokens() > 0) planner_.draft_max_k = d.max_speculative_tokens();
  if (d.context_length() > 0) {
    planner_.draft_context_length =
        std::min<int>(options_.planner.context_length, d.context_length());
  }
  kv_.SetDraft({static_cast<int>(d.kv_block_size()), static_cast<int>(d.kv_total_blocks())}, true);
}

void Engine::Monitor() {
  absl::Time next_stats = absl::Now();
  while (!stopping_.load()) {
    absl::SleepFor(options_.monitor_interval);
    if (!target_available_.load() && target_->IsServing()) {
      absl::StatusOr<v1::DescribeResponse> d = target_->Describe();
      if (d.ok()) {
        LOG(INFO) << "target group is back; re-prefilling running sequences";
        target_reset_pending_ = true;
        target_available_ = true;
      }
    }
    if (draft_ != nullptr && !draft_available_.load() && draft_->IsServing()) {
      absl::StatusOr<v1::DescribeResponse> d = draft_->Describe();
      if (d.ok()) {
        LOG(INFO) << "draft worker " << draft_->address() << " is back (instance "
                  << d->instance_id() << "); speculation resumes";
        {
          absl::MutexLock lock(&cluster_mu_);
          cluster_.draft = *d;
          cluster_.draft_described = true;
          pending_draft_description_ = *d;
        }
        draft_instance_ = d->instance_id();
        draft_reset_pending_ = true;
        draft_available_ = true;
        if (metrics_) metrics_->SetDraftAvailable(true);
      }
    }
    if (absl::Now() >= next_stats && metrics_ != nullptr) {
      next_stats = absl::Now() + absl::Seconds(1);
      if (target_available_.load()) {
        absl::StatusOr<v1::WorkerStats> st = target_->GetStats();
        if (st.ok()) metrics_->SetKvBlocks("target", st->kv_used_blocks(), st->kv_total_blocks());
      }
      if (draft_ != nullptr && draft_available_.load()) {
        absl::StatusOr<v1::WorkerStats> st = draft_->GetStats();
        if (st.ok()) metrics_->SetKvBlocks("draft", st->kv_used_blocks(), st->kv_total_blocks());
      }
    }
  }
}

}  // namespace tandem::coordinator
