#include "coordinator/engine.h"

#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem::coordinator {

Engine::Engine(const EngineOptions& options, const Tokenizer* tokenizer,
               std::unique_ptr<WorkerApi> target, std::unique_ptr<WorkerApi> draft,
               CoordinatorMetrics* metrics)
    : options_(options),
      planner_(options.planner),
      tokenizer_(tokenizer),
      target_(std::move(target)),
      draft_(std::move(draft)),
      metrics_(metrics),
      proposers_(ProposerConfig{}),  // ServeProposers sets it.
      kv_(options.planner.max_k,
          options.planner.optimistic ? std::max(1, options.planner.predraft_branches) : 0),
      queue_(options.max_queue),
      planning_batch_(options.planner.planning_batch_window) {
  ServeProposers({});
}

void Engine::ServeProposers(const std::vector<v1::SpeculationMethod>& target_methods) {
  ProposerConfig config;
  config.draft_worker = draft_ != nullptr;
  config.extra = options_.extra_proposers;
  config.prompt_lookup_branches = options_.prompt_lookup_branches;
  config.metrics = metrics_ != nullptr ? metrics_->registry() : nullptr;
  config.target_methods = target_methods;
  config.medusa_nodes = options_.medusa_nodes;
  proposers_ = ProposerRegistry(config);
  for (v1::SpeculationMethod m : proposers_.served_methods()) {
    if (server_acceptance_.count(m) > 0) continue;
    for (auto& shape : server_acceptance_[m]) {
      shape = std::make_unique<spec::PositionAcceptance>(options_.controller.max_k,
                                                         options_.controller.server_forgetting);
    }
  }
}

Engine::~Engine() { Stop(); }

ClusterInfo Engine::cluster() const {
  absl::MutexLock lock(&cluster_mu_);
  return cluster_;
}

absl::Status Engine::Start(absl::Duration wait, const std::function<bool()>& cancelled) {
  if (absl::Status described = DescribeWorkers(absl::Now() + wait, cancelled); !described.ok()) {
    return described;
  }
  target_available_ = true;
  if (metrics_ != nullptr) metrics_->SetDraftAvailable(draft_available_.load());
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
  for (auto& s : running_) s->Fail(absl::UnavailableError("server shutting down"), now);
  ReleaseOnWorkers(running_);
  running_.clear();
}

absl::StatusOr<std::shared_ptr<Sequence>> Engine::Submit(ValidatedRequest request,
                                                         std::vector<int32_t> prompt,
                                                         int max_new_tokens, absl::Time deadline,
                                                         std::shared_ptr<OutputChannel> output) {
  if (absl::Status fits = kv_.CheckFitsTarget(static_cast<int>(prompt.size()), max_new_tokens);
      !fits.ok()) {
    return fits;
  }
  const uint64_t id = next_id_.fetch_add(1);
  auto seq = std::make_shared<Sequence>(id, std::move(request), std::move(prompt), max_new_tokens,
                                        tokenizer_, options_.stop_token_ids, options_.controller,
                                        absl::Now(), std::move(output));
  seq->deadline = deadline;
  // The map is fixed after construction; the estimates are read and fed on the engine
  // thread only.
  const std::vector<const Proposer*> chain = proposers_.ChainFor(seq->request().speculation.method);
  std::vector<Sequence::ServerAcceptance> priors;
  for (const Proposer* p : chain) {
    const auto& shapes = server_acceptance_.at(p->method());
    priors.push_back({shapes[0].get(), shapes[1].get()});
  }
  seq->AttachProposers(chain, priors);
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

void Engine::ExpireQueued(absl::Time now) {
  for (auto& e : queue_.RemoveIf([now](const std::shared_ptr<Sequence>& s) {
         return s->cancelled.load() || now > s->deadline;
       })) {
    const std::shared_ptr<Sequence>& s = e.payload;
    s->Fail(s->cancelled.load()
                ? absl::CancelledError("request cancelled while queued")
                : absl::DeadlineExceededError("request deadline exceeded while waiting for "
                                              "admission (KV cache or running-batch limit)"),
            now);
  }
}

bool Engine::EndHeldIfDone(absl::Time now) {
  if (!held_) return false;
  if (held_->cancelled.load()) {
    held_->Fail(absl::CancelledError("request cancelled while queued"), now);
  } else if (now > held_->deadline) {
    held_->Fail(absl::DeadlineExceededError(
                    "request deadline exceeded while waiting for room in the KV cache"),
                now);
  } else {
    return false;
  }
  held_.reset();
  return true;
}

void Engine::AdmitWaiting(absl::Time now) {
  ExpireQueued(now);
  EndHeldIfDone(now);
  int target_used = 0, draft_used = 0;
  for (const auto& s : running_) {
    target_used += kv_.TargetBlocks(s->prompt_length(), s->generated() + s->remaining());
    if (s->draft_allowed) {
      draft_used += kv_.DraftBlocks(s->prompt_length(), s->generated() + s->remaining());
    }
  }
  while (static_cast<int>(running_.size()) < options_.max_running) {
    if (!held_) {
      std::vector<AdmissionQueue<std::shared_ptr<Sequence>>::Entry> next = queue_.PopUpTo(1);
      if (next.empty()) break;
      held_ = std::move(next[0].payload);
    }
    if (EndHeldIfDone(now)) continue;
    const int prompt = held_->prompt_length(), max_new = held_->remaining();
    const KvAdmission::Decision d = kv_.Decide(prompt, max_new, target_used, draft_used);
    if (!d.admit) break;  // Wait for running sequences to finish (FIFO: no overtaking).
    target_used += kv_.TargetBlocks(prompt, max_new);
    held_->draft_allowed = d.use_draft;
    if (d.use_draft) draft_used += kv_.DraftBlocks(prompt, max_new);
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
  if (st.time_to_first_token_ms() > 0) {
    metrics_->RecordTimeToFirstToken(st.time_to_first_token_ms());
  }
  if (st.generated_tokens() > 1) metrics_->RecordTimePerOutputToken(st.time_per_output_token_ms());
  metrics_->RecordQueueTime(st.queue_time_ms());
}

void Engine::ReapSequences(absl::Time now) {
  std::vector<std::shared_ptr<Sequence>> release;
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
    release.push_back(s);
    return true;
  });
  running_.erase(end, running_.end());
  if (!release.empty()) ReleaseOnWorkers(release);
}

void Engine::ReleaseOnWorkers(const std::vector<std::shared_ptr<Sequence>>& sequences) {
  if (sequences.empty()) return;
  std::vector<uint64_t> ids, draft_ids;
  for (const auto& s : sequences) {
    ids.push_back(s->id());
    // Only a sequence with a draft-worker proposer ever sent the draft anything: the
    // others cost it no release call.
    bool on_draft = false;
    for (int slot = 0; slot < s->chain_size(); ++slot) {
      on_draft |= s->proposer(slot).capabilities().site == ProposerSite::kDraftWorker;
      s->proposer(slot).AppendWorkerIds(*s, s->proposer_state(slot), &draft_ids);
    }
    if (on_draft) draft_ids.push_back(s->id());
  }
  if (target_available_.load()) {
    target_exec_.Submit([this, ids] { return target_->Release(ids); });
  }
  if (draft_ == nullptr || draft_ids.empty()) return;
  if (draft_available_.load()) {
    draft_exec_.Submit([this, draft_ids] { return draft_->Release(draft_ids); });
  } else {
    unreleased_draft_ids_.insert(unreleased_draft_ids_.end(), draft_ids.begin(), draft_ids.end());
  }
}

void Engine::ResetProposers(Sequence& s, ProposerSite site) {
  for (int slot = 0; slot < s.chain_size(); ++slot) {
    if (s.proposer(slot).capabilities().site == site) {
      s.proposer(slot).Reset(s, s.proposer_state(slot));
    }
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
    std::optional<v1::DescribeResponse> described;
    {
      absl::MutexLock lock(&cluster_mu_);
      described.swap(pending_draft_description_);
    }
    if (described.has_value()) ApplyDraftDescription(*described);
    for (auto& s : running_) ResetProposers(*s, ProposerSite::kDraftWorker);
    // What finished while it was down (a draft that was only unreachable still holds it).
    if (!unreleased_draft_ids_.empty()) {
      std::vector<uint64_t> ids = std::move(unreleased_draft_ids_);
      unreleased_draft_ids_.clear();
      draft_exec_.Submit([this, ids] { return draft_->Release(ids); });
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
    WorkerAvailability workers;
    workers.draft = draft_ != nullptr && draft_available_.load();
    workers.target = true;
    // The mode pipelined phases run in; sequential when this phase may not pipeline
    // (what the cost terms then assume, too).
    workers.cost_batch = planning_batch_.Next(static_cast<int>(running.size()));
    const PipelineMode mode = ChoosePipelineMode(workers.cost_batch);
    workers.pipeline_mode =
        PipeliningWanted(running, planner_.pipelining) ? mode : PipelineMode::kSequential;
    SetCostTerms(workers.cost_batch, &workers);
    PhasePlan plan = PlanPhase(running, planner_, workers);
    if (metrics_) {
      for (const auto& [reason, steps] : plan.fallbacks)
        metrics_->RecordFallbackSteps(reason, steps);
    }
    if (plan.empty()) {
      absl::SleepFor(absl::Milliseconds(1));
      continue;
    }
    if (metrics_) {
      metrics_->RecordPhaseMode(PipelineModeLabel(plan.mode),
                                plan.mode == PipelineMode::kSequential ? 0.0 : pipeline_gain_);
    }
    RunPhase(plan);
  }
}

}  // namespace tandem::coordinator
