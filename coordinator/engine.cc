#include "coordinator/engine.h"

#include <glog/logging.h>

#include <algorithm>
#include <future>
#include <optional>

#include "absl/strings/str_cat.h"

namespace tandem::coordinator {
namespace {

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

bool IsTransportFailure(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsAborted(s) ||
         absl::IsCancelled(s) || absl::IsUnknown(s);
}

struct TargetResult {
  absl::Status prefill_status;
  std::optional<absl::StatusOr<v1::VerifyResponse>> verify;
  absl::Duration verify_wall;
};

struct DraftResult {
  absl::Status prefill_status;
  std::optional<absl::StatusOr<v1::DraftResponse>> draft;
  absl::Duration draft_wall;
};

}  // namespace

Engine::Engine(const EngineOptions& options, const Tokenizer* tokenizer,
               std::unique_ptr<WorkerClient> target, std::unique_ptr<WorkerClient> draft,
               CoordinatorMetrics* metrics)
    : options_(options),
      planner_(options.planner),
      tokenizer_(tokenizer),
      target_(std::move(target)),
      draft_(std::move(draft)),
      metrics_(metrics),
      queue_(options.max_queue) {}

Engine::~Engine() { Stop(); }

absl::Status Engine::Start(absl::Duration wait, const std::function<bool()>& cancelled) {
  const absl::Time give_up = absl::Now() + wait;
  for (;;) {
    if (cancelled && cancelled()) return absl::CancelledError("start-up cancelled");
    absl::StatusOr<v1::DescribeResponse> d = target_->Describe();
    if (d.ok() && target_->IsServing()) {
      cluster_.target = *d;
      break;
    }
    if (absl::Now() > give_up) {
      return absl::UnavailableError(absl::StrCat(
          "target worker ", target_->address(),
          " not ready: ", d.ok() ? "not serving yet" : std::string(d.status().message())));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  target_instance_ = cluster_.target.instance_id();
  if (draft_ != nullptr) {
    cluster_.has_draft = true;
    for (;;) {
      if (cancelled && cancelled()) return absl::CancelledError("start-up cancelled");
      absl::StatusOr<v1::DescribeResponse> d = draft_->Describe();
      if (d.ok() && draft_->IsServing()) {
        cluster_.draft = *d;
        draft_available_ = true;
        draft_instance_ = d->instance_id();
        break;
      }
      if (absl::Now() > give_up) {
        // Serving without the draft is allowed: the monitor picks it up later.
        LOG(WARNING) << "draft worker " << draft_->address()
                     << " not ready; starting without speculation from the draft";
        break;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
  }
  planner_.target_max_batch_tokens = cluster_.target.max_batch_tokens();
  planner_.context_length =
      std::min<int>(planner_.context_length, cluster_.target.context_length());
  if (cluster_.draft.max_batch_tokens() > 0) {
    planner_.draft_max_batch_tokens = cluster_.draft.max_batch_tokens();
    planner_.draft_max_k = cluster_.draft.max_speculative_tokens();
  }
  planner_.max_k = std::min<int>(planner_.max_k, cluster_.target.max_speculative_tokens());
  target_available_ = true;
  started_ = absl::Now();
  loop_thread_ = std::thread([this] { Loop(); });
  monitor_thread_ = std::thread([this] { Monitor(); });
  return absl::OkStatus();
}

void Engine::Stop() {
  if (stopping_.exchange(true)) return;
  if (loop_thread_.joinable()) loop_thread_.join();
  if (monitor_thread_.joinable()) monitor_thread_.join();
  absl::Time now = absl::Now();
  for (auto& e : queue_.PopUpTo(static_cast<size_t>(-1))) {
    e.payload->Fail(absl::UnavailableError("server shutting down"), now);
  }
  if (held_) held_->Fail(absl::UnavailableError("server shutting down"), now);
  std::vector<uint64_t> ids;
  for (auto& s : running_) {
    s->Fail(absl::UnavailableError("server shutting down"), now);
    ids.push_back(s->id());
  }
  running_.clear();
  ReleaseOnWorkers(ids);
}

int Engine::BlocksFor(const Sequence& s, int block_size) const {
  if (block_size <= 0) return 0;
  const int tokens = s.prompt_length() + s.remaining() + s.generated() + planner_.max_k + 1;
  return (tokens + block_size - 1) / block_size;
}

absl::StatusOr<std::shared_ptr<Sequence>> Engine::Submit(ValidatedRequest request,
                                                         std::vector<int32_t> prompt,
                                                         int max_new_tokens, absl::Time deadline,
                                                         std::shared_ptr<OutputChannel> output) {
  const uint64_t id = next_id_.fetch_add(1);
  auto seq = std::make_shared<Sequence>(id, std::move(request), std::move(prompt), max_new_tokens,
                                        tokenizer_, options_.eos_token_id, options_.adaptive_k,
                                        absl::Now(), std::move(output));
  seq->deadline = deadline;
  const int target_need = BlocksFor(*seq, cluster_.target.kv_block_size());
  if (target_need > static_cast<int>(cluster_.target.kv_total_blocks())) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request needs ", target_need, " KV blocks (prompt + max_new_tokens) but the target ",
        "holds ", cluster_.target.kv_total_blocks(), "; shorten it or raise --kv_cache_mb"));
  }
  absl::Status pushed = queue_.TryPush(id, std::shared_ptr<Sequence>(seq));
  if (!pushed.ok()) return pushed;
  if (metrics_) metrics_->SetQueueDepth(static_cast<int>(queue_.size()));
  return seq;
}

void Engine::Cancel(const std::shared_ptr<Sequence>& sequence) {
  sequence->cancelled = true;
  std::optional<std::shared_ptr<Sequence>> queued = queue_.Remove(sequence->id());
  if (queued.has_value()) {
    (*queued)->Fail(absl::CancelledError("request cancelled while queued"), absl::Now());
  }
}

double Engine::draft_busy_fraction() const {
  absl::Duration wall = absl::Now() - started_;
  return wall > absl::ZeroDuration() ? absl::FDivDuration(draft_exec_.busy_time(), wall) : 0.0;
}

double Engine::target_busy_fraction() const {
  absl::Duration wall = absl::Now() - started_;
  return wall > absl::ZeroDuration() ? absl::FDivDuration(target_exec_.busy_time(), wall) : 0.0;
}

void Engine::AdmitWaiting(absl::Time now) {
  const int target_total = static_cast<int>(cluster_.target.kv_total_blocks());
  const int draft_total = static_cast<int>(cluster_.draft.kv_total_blocks());
  int target_used = 0, draft_used = 0;
  for (const auto& s : running_) {
    target_used += BlocksFor(*s, cluster_.target.kv_block_size());
    draft_used += BlocksFor(*s, cluster_.draft.kv_block_size());
  }
  while (static_cast<int>(running_.size()) < options_.max_running) {
    if (!held_) {
      std::vector<AdmissionQueue<std::shared_ptr<Sequence>>::Entry> next = queue_.PopUpTo(1);
      if (next.empty()) break;
      held_ = std::move(next[0].payload);
    }
    if (held_->cancelled.load()) {
      held_->Fail(absl::CancelledError("request cancelled while queued"), now);
      held_.reset();
      continue;
    }
    const int t = BlocksFor(*held_, cluster_.target.kv_block_size());
    const int d = cluster_.has_draft ? BlocksFor(*held_, cluster_.draft.kv_block_size()) : 0;
    if (target_used + t > target_total || (cluster_.has_draft && draft_used + d > draft_total)) {
      break;  // Wait for running sequences to finish (FIFO: no overtaking).
    }
    target_used += t;
    draft_used += d;
    held_->mutable_stats().admitted = now;
    running_.push_back(std::move(held_));
    held_.reset();
  }
  if (metrics_) {
    metrics_->SetQueueDepth(static_cast<int>(queue_.size()) + (held_ ? 1 : 0));
    metrics_->SetRunningSequences(static_cast<int>(running_.size()));
  }
}

void Engine::RecordFinished(const Sequence& s, absl::Time now) {
  if (metrics_ == nullptr) return;
  v1::RequestStats st = s.PublicStats(now);
  if (st.time_to_first_token_ms() > 0)
    metrics_->RecordTimeToFirstToken(st.time_to_first_token_ms());
  if (st.generated_tokens() > 1) metrics_->RecordTimePerOutputToken(st.time_per_output_token_ms());
  metrics_->RecordQueueTime(st.queue_time_ms());
}

void Engine::ReapSequences(absl::Time now) {
  std::vector<uint64_t> release;
  auto end = std::remove_if(running_.begin(), running_.end(), [&](std::shared_ptr<Sequence>& s) {
    if (!s->finished()) {
      if (s->cancelled.load()) {
        s->Fail(absl::CancelledError("request cancelled by the client"), now);
      } else if (now > s->deadline) {
        s->Fail(absl::DeadlineExceededError("request deadline exceeded"), now);
      } else if (!target_available_.load() && s->paused_since != absl::InfinitePast() &&
                 now - s->paused_since > options_.target_recovery_timeout) {
        s->Fail(absl::UnavailableError(
                    absl::StrCat("target group unavailable for more than ",
                                 absl::FormatDuration(options_.target_recovery_timeout))),
                now);
      }
    }
    if (!s->finished()) return false;
    RecordFinished(*s, now);
    release.push_back(s->id());
    return true;
  });
  running_.erase(end, running_.end());
  if (!release.empty()) ReleaseOnWorkers(release);
}

void Engine::ReleaseOnWorkers(const std::vector<uint64_t>& ids) {
  if (ids.empty()) return;
  if (target_available_.load()) {
    target_exec_.Submit([this, ids] { return target_->Release(ids); });
  }
  if (draft_ != nullptr && draft_available_.load()) {
    draft_exec_.Submit([this, ids] { return draft_->Release(ids); });
  }
}

void Engine::ApplyResets() {
  if (target_reset_pending_.exchange(false)) {
    for (auto& s : running_) {
      s->target_cached = 0;
      s->paused_since = absl::InfinitePast();
    }
  }
  if (draft_reset_pending_.exchange(false)) {
    for (auto& s : running_) {
      s->draft_cache.clear();
      s->continuation.clear();
    }
  }
}

void Engine::Loop() {
  while (!stopping_.load()) {
    const absl::Time now = absl::Now();
    ApplyResets();
    ReapSequences(now);
    AdmitWaiting(now);
    if (running_.empty()) {
      queue_.WaitUntilNonEmpty(absl::Milliseconds(50));
      continue;
    }
    if (!target_available_.load()) {
      for (auto& s : running_) {
        if (s->paused_since == absl::InfinitePast()) s->paused_since = now;
      }
      absl::SleepFor(absl::Milliseconds(20));
      continue;
    }
    std::vector<Sequence*> running;
    running.reserve(running_.size());
    for (auto& s : running_) running.push_back(s.get());
    if (options_.measured_costs) {
      // The cost model of a step over this batch, from measured call times.
      const spec::CostModel costs = spec::BatchCostModel(
          verify_fit_, draft_fit_, static_cast<int>(running.size()), options_.adaptive_k.cost);
      for (Sequence* s : running) s->adaptive_k().SetCostModel(costs);
    }
    WorkerAvailability workers{draft_ != nullptr && draft_available_.load(), true,
                               verify_ms_ema_ > 0 ? draft_ms_ema_ / verify_ms_ema_ : 0.0};
    PhasePlan plan = PlanPhase(running, planner_, workers);
    if (plan.empty()) {
      absl::SleepFor(absl::Milliseconds(1));
      continue;
    }
    RunPhase(plan);
  }
}

void Engine::RunPhase(PhasePlan& plan) {
  const absl::Time phase_start = absl::Now();
  std::future<TargetResult> target_future;
  const bool target_work =
      plan.target_prefill.sequences_size() > 0 || plan.verify.sequences_size() > 0;
  if (target_work) {
    target_future = target_exec_.Submit([this, &plan] {
      TargetResult r;
      if (plan.target_prefill.sequences_size() > 0) {
        r.prefill_status = target_->Prefill(plan.target_prefill).status();
      }
      if (plan.verify.sequences_size() > 0 && r.prefill_status.ok()) {
        absl::Time t = absl::Now();
        r.verify = target_->Verify(plan.verify);
        r.verify_wall = absl::Now() - t;
      }
      return r;
    });
  }
  std::future<DraftResult> draft_future;
  const bool draft_work =
      plan.draft_prefill.sequences_size() > 0 || plan.draft.sequences_size() > 0;
  if (draft_work) {
    draft_future = draft_exec_.Submit([this, &plan] {
      DraftResult r;
      if (plan.draft_prefill.sequences_size() > 0) {
        r.prefill_status = draft_->Prefill(plan.draft_prefill).status();
      }
      if (plan.draft.sequences_size() > 0 && r.prefill_status.ok()) {
        absl::Time t = absl::Now();
        r.draft = draft_->Draft(plan.draft);
        r.draft_wall = absl::Now() - t;
      }
      return r;
    });
  }

  CoordinatorMetrics::StepLatency latency;
  // Exponential moving averages of the two sides' call times: the planner's measure of
  // whether overlapping them (ping-pong) can pay.
  const auto update_ema = [](double* ema, absl::Duration d) {
    const double ms = absl::ToDoubleMilliseconds(d);
    *ema = *ema == 0 ? ms : 0.9 * *ema + 0.1 * ms;
  };
  // Draft results first: a continuation must be in place before its verify is applied.
  if (draft_work) {
    DraftResult r = draft_future.get();
    if (r.draft.has_value() && r.draft->ok()) {
      update_ema(&draft_ms_ema_, r.draft_wall);
      int proposals = 0;
      for (const v1::DraftSequence& d : plan.draft.sequences()) proposals += d.num_draft_tokens();
      draft_fit_.Observe(proposals, absl::ToDoubleMilliseconds(r.draft_wall));
    }
    absl::Status failure = r.prefill_status;
    if (failure.ok() && r.draft.has_value() && !r.draft->ok()) failure = r.draft->status();
    if (!failure.ok()) {
      OnDraftFailure(failure, plan);
    } else {
      for (const v1::PrefillSequence& p : plan.draft_prefill.sequences()) {
        for (auto& s : running_) {
          if (s->id() != p.sequence_id()) continue;
          s->OnDrafted(p.start_position(), {p.tokens().begin(), p.tokens().end()}, {});
        }
      }
      if (r.draft.has_value()) {
        const v1::DraftResponse& resp = **r.draft;
        latency.draft_ms = resp.compute_ms();
        for (int i = 0; i < resp.sequences_size() && i < plan.draft.sequences_size(); ++i) {
          Sequence* s = plan.draft_sequences[i];
          const v1::DraftSequence& req = plan.draft.sequences(i);
          std::vector<v1::ProposedToken> drafted(resp.sequences(i).proposals().begin(),
                                                 resp.sequences(i).proposals().end());
          s->OnDrafted(req.start_position(), {req.tokens().begin(), req.tokens().end()}, drafted);
          if (plan.draft_is_continuation[i]) {
            s->continuation = std::move(drafted);
          } else {
            s->proposals = std::move(drafted);
            s->has_proposals = !s->proposals.empty();
            s->proposal_method = v1::SPECULATION_METHOD_DRAFT;
          }
        }
      }
    }
  }

  if (target_work) {
    TargetResult r = target_future.get();
    if (r.verify.has_value() && r.verify->ok()) {
      update_ema(&verify_ms_ema_, r.verify_wall);
      int rows = 0;
      for (const v1::VerifySequence& v : plan.verify.sequences()) {
        rows += v.tokens_size() + v.proposals_size();
      }
      verify_fit_.Observe(rows, absl::ToDoubleMilliseconds(r.verify_wall));
    }
    const absl::Time now = absl::Now();
    if (!r.prefill_status.ok()) {
      std::vector<Sequence*> batch;
      for (const auto& p : plan.target_prefill.sequences()) {
        for (auto& s : running_) {
          if (s->id() == p.sequence_id()) batch.push_back(s.get());
        }
      }
      OnTargetFailure(r.prefill_status, batch, now);
    } else {
      for (const v1::PrefillSequence& p : plan.target_prefill.sequences()) {
        for (auto& s : running_) {
          if (s->id() == p.sequence_id()) s->target_cached = p.start_position() + p.tokens_size();
        }
      }
      if (r.verify.has_value()) {
        if (!r.verify->ok()) {
          OnTargetFailure(r.verify->status(), plan.verify_sequences, now);
        } else {
          const v1::VerifyResponse& resp = **r.verify;
          latency.verify_ms = resp.compute_ms();
          latency.collective_ms = resp.collective_ms();
          latency.rpc_ms = std::max(0.0, Ms(r.verify_wall) - resp.compute_ms());
          for (int i = 0; i < resp.sequences_size() && i < plan.verify.sequences_size(); ++i) {
            Sequence* s = plan.verify_sequences[i];
            const int before = s->generated();
            s->OnVerified(resp.sequences(i), plan.verify_proposed[i], now);
            if (metrics_) {
              metrics_->RecordStep({s->proposal_method, plan.verify_proposed[i],
                                    static_cast<int>(resp.sequences(i).num_accepted()),
                                    s->generated() - before});
            }
          }
        }
      }
    }
  }
  if (metrics_) {
    const double phase_ms = Ms(absl::Now() - phase_start);
    double worker_ms = 0;
    if (latency.verify_ms)
      worker_ms = std::max(worker_ms, *latency.verify_ms + latency.rpc_ms.value_or(0));
    if (latency.draft_ms) worker_ms = std::max(worker_ms, *latency.draft_ms);
    latency.overhead_ms = std::max(0.0, phase_ms - worker_ms);
    metrics_->RecordStepLatency(latency);
    metrics_->SetBusyFractions(draft_busy_fraction(), target_busy_fraction());
  }
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
  LOG(ERROR) << "target rejected a step: " << status;
  for (Sequence* s : batch) {
    s->Fail(absl::Status(
                absl::IsResourceExhausted(status) ? status.code() : absl::StatusCode::kInternal,
                absl::StrCat("target worker rejected the step: ", status.message())),
            now);
  }
}

void Engine::OnDraftFailure(const absl::Status& status, const PhasePlan& plan) {
  for (Sequence* s : plan.draft_sequences) {
    s->draft_cache.clear();
    s->continuation.clear();
  }
  for (const auto& p : plan.draft_prefill.sequences()) {
    for (auto& s : running_) {
      if (s->id() == p.sequence_id()) s->draft_cache.clear();
    }
  }
  if (absl::IsNotFound(status)) {
    LOG(WARNING) << "draft lost sequences, re-prefilling: " << status;
    return;
  }
  LOG(WARNING) << "draft worker unavailable, continuing without it: " << status;
  draft_available_ = false;
  if (metrics_) metrics_->SetDraftAvailable(false);
}

void Engine::Monitor() {
  absl::Time next_stats = absl::Now();
  while (!stopping_.load()) {
    absl::SleepFor(options_.monitor_interval);
    if (!target_available_.load() && target_->IsServing()) {
      absl::StatusOr<v1::DescribeResponse> d = target_->Describe();
      if (d.ok()) {
        LOG(INFO) << "target group is back; re-prefilling running sequences";
        target_instance_ = d->instance_id();
        target_reset_pending_ = true;
        target_available_ = true;
      }
    }
    if (draft_ != nullptr && !draft_available_.load() && draft_->IsServing()) {
      absl::StatusOr<v1::DescribeResponse> d = draft_->Describe();
      if (d.ok()) {
        LOG(INFO) << "draft worker is back; speculation resumes";
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
