#include "worker/worker_service.h"

#include <glog/logging.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "worker/lookahead_proposer.h"

namespace tandem {
namespace worker {
namespace {

std::string RandomInstanceId() {
  std::random_device device;
  std::mt19937_64 rng((uint64_t{device()} << 32) ^ device() ^
                      static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())));
  return absl::StrFormat("%016x", rng());
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

// Every target-side proposer this worker serves (any role may be the target leader):
// the built-in Lookahead, and the caller's (`more`, may be null).
TargetProposers ServedTargetProposers(const TargetProposers* more) {
  TargetProposers proposers;
  proposers.Add(std::make_unique<LookaheadTargetProposer>());
  proposers.Include(more);
  return proposers;
}

}  // namespace

WorkerService::WorkerService(ModelExecutor* executor, const WorkerServiceOptions& options)
    : executor_(executor),
      options_(options),
      instance_id_(RandomInstanceId()),
      started_(absl::Now()),
      target_proposers_(ServedTargetProposers(options.target_proposers)),
      draft_engine_(executor, DraftEngineOptions{options.proposal_top_k}),
      target_engine_(executor, &target_proposers_) {
  ParseUnary(this, "Describe", &WorkerService::Describe);
  ParseUnary(this, "Prefill", &WorkerService::Prefill);
  ParseUnary(this, "Draft", &WorkerService::Draft);
  ParseUnary(this, "Verify", &WorkerService::Verify);
  ParseUnary(this, "Truncate", &WorkerService::Truncate);
  ParseUnary(this, "Release", &WorkerService::Release);
  ParseUnary(this, "GetStats", &WorkerService::GetStats);
  CheckEveryMethodParsed();
  const LlamaConfig& c = executor_->config();
  limits_.vocab_size = c.vocab_size;
  limits_.max_batch_tokens = executor_->max_batch_tokens();
  limits_.max_speculative_tokens = options_.max_speculative_tokens;
  limits_.context_length = c.max_position_embeddings;
  limits_.serves_target_method = [this](v1::SpeculationMethod m) {
    return target_proposers_.Find(m) != nullptr;
  };

  const KvCacheStats kv = executor_->kv_stats();
  description_.set_role(options_.role);
  for (v1::SpeculationMethod m : target_proposers_.methods()) description_.add_target_methods(m);
  v1::ModelDescription* model = description_.mutable_model();
  model->set_name(options_.model_name);
  model->set_architecture(c.architecture);
  model->set_vocab_size(c.vocab_size);
  model->set_hidden_size(c.hidden_size);
  model->set_num_layers(c.num_layers);
  model->set_num_attention_heads(c.num_heads);
  model->set_num_key_value_heads(c.num_kv_heads);
  model->set_max_position_embeddings(c.max_position_embeddings);
  model->set_num_parameters(static_cast<uint64_t>(c.NumParameters()));
  model->set_tensor_parallel_size(executor_->tp_size());
  model->set_backend(options_.backend);
  model->set_synthetic(options_.synthetic);
  description_.set_tp_rank(0);
  description_.set_tp_size(executor_->tp_size());
  description_.set_collective_backend(executor_->collective_backend());
  description_.set_kv_block_size(kv.block_size);
  description_.set_kv_total_blocks(kv.total_blocks);
  description_.set_max_batch_tokens(limits_.max_batch_tokens);
  description_.set_max_speculative_tokens(options_.max_speculative_tokens);
  description_.set_context_length(c.max_position_embeddings);
  description_.set_bos_token_id(c.bos_token_id);
  description_.set_eos_token_id(c.eos_token_ids.empty() ? -1 : c.eos_token_ids[0]);
  description_.set_lease_timeout_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.lease_timeout)));
  description_.set_instance_id(instance_id_);

  stats_.set_kv_total_blocks(kv.total_blocks);
  stats_.set_kv_used_blocks(kv.used_blocks);
  stats_.set_instance_id(instance_id_);
}

WorkerService::~WorkerService() { Stop(); }

void WorkerService::StartLeaseReaper() {
  lease_thread_ = std::thread([this] {
    const absl::Duration period =
        std::min(absl::Seconds(1), std::max(absl::Milliseconds(10), options_.lease_timeout / 4));
    absl::MutexLock lock(&lease_mu_);
    while (!lease_stop_) {
      lease_wake_.WaitWithTimeout(&lease_mu_, period);
      if (lease_stop_) break;
      lease_mu_.Unlock();
      const int expired = ExpireLeases(absl::Now());
      if (expired > 0) LOG(INFO) << "worker: released " << expired << " expired sequences";
      lease_mu_.Lock();
    }
  });
}

void WorkerService::Stop() {
  {
    absl::MutexLock lock(&lease_mu_);
    lease_stop_ = true;
    lease_wake_.SignalAll();
  }
  if (lease_thread_.joinable()) lease_thread_.join();
}

CachedLengthFn WorkerService::CachedLengths() {
  return [this](uint64_t id) { return executor_->CachedLength(id); };
}

void WorkerService::Touch(uint64_t id) { last_touch_[id] = absl::Now(); }

void WorkerService::UpdateSnapshot() {
  const KvCacheStats kv = executor_->kv_stats();
  const ExecutorTimes times = executor_->times();
  absl::MutexLock lock(&stats_mu_);
  stats_.set_active_sequences(kv.num_sequences);
  stats_.set_kv_total_blocks(kv.total_blocks);
  stats_.set_kv_used_blocks(kv.used_blocks);
  stats_.set_compute_ms(times.forward_ms - times.collective_ms);
  stats_.set_collective_ms(times.collective_ms);
}

template <typename Body>
absl::Status WorkerService::Step(bool counts_as_model_step, int64_t positions, Body&& body) {
  absl::MutexLock lock(&step_mu_);
  const absl::Time start = absl::Now();
  absl::Status status = body();
  UpdateSnapshot();
  absl::MutexLock stats_lock(&stats_mu_);
  stats_.set_busy_ms(stats_.busy_ms() + absl::ToDoubleMilliseconds(absl::Now() - start));
  if (status.ok() && counts_as_model_step) {
    stats_.set_steps(stats_.steps() + 1);
    stats_.set_tokens_processed(stats_.tokens_processed() + positions);
  }
  return status;
}

absl::Status WorkerService::DoDescribe(v1::DescribeResponse* response) {
  *response = description_;
  return absl::OkStatus();
}

absl::Status WorkerService::DoPrefill(const v1::PrefillRequest& request,
                                      v1::PrefillResponse* response) {
  int64_t positions = 0;
  for (const auto& seq : request.sequences()) positions += seq.tokens_size();
  return Step(true, positions, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_) {
    if (absl::Status s = executor_->Available(); !s.ok()) return s;
    if (absl::Status s = ValidatePrefillRequest(request, limits_, CachedLengths()); !s.ok()) {
      return s;
    }
    absl::StatusOr<v1::PrefillResponse> result = RunPrefill(executor_, request);
    if (!result.ok()) return result.status();
    for (const auto& seq : request.sequences()) Touch(seq.sequence_id());
    *response = *std::move(result);
    return absl::OkStatus();
  });
}

absl::Status WorkerService::DoDraft(const v1::DraftRequest& request, v1::DraftResponse* response) {
  if (options_.role != v1::WORKER_ROLE_DRAFT) {
    return absl::FailedPreconditionError("Draft called on a target worker");
  }
  int64_t positions = 0;
  for (const auto& seq : request.sequences()) {
    positions += seq.tokens_size() + std::max<int64_t>(seq.num_draft_tokens(), 1) - 1;
  }
  return Step(true, positions, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_) {
    if (absl::Status s = executor_->Available(); !s.ok()) return s;
    if (absl::Status s = ValidateDraftRequest(request, limits_, CachedLengths()); !s.ok()) {
      return s;
    }
    absl::StatusOr<v1::DraftResponse> result = draft_engine_.Draft(request);
    if (!result.ok()) return result.status();
    for (const auto& seq : request.sequences()) Touch(seq.sequence_id());
    *response = *std::move(result);
    return absl::OkStatus();
  });
}

absl::Status WorkerService::DoVerify(const v1::VerifyRequest& request,
                                     v1::VerifyResponse* response) {
  if (options_.role != v1::WORKER_ROLE_TARGET) {
    return absl::FailedPreconditionError("Verify called on a draft worker");
  }
  int64_t positions = 0;
  for (const auto& seq : request.sequences()) {
    positions += seq.tokens_size() + seq.proposals_size();
  }
  return Step(true, positions, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_) {
    if (absl::Status s = executor_->Available(); !s.ok()) return s;
    if (absl::Status s = ValidateVerifyRequest(request, limits_, CachedLengths()); !s.ok()) {
      return s;
    }
    absl::StatusOr<v1::VerifyResponse> result = target_engine_.Verify(request);
    if (!result.ok()) return result.status();
    for (const auto& seq : request.sequences()) Touch(seq.sequence_id());
    *response = *std::move(result);
    return absl::OkStatus();
  });
}

absl::Status WorkerService::DoTruncate(const v1::TruncateRequest& request) {
  return Step(false, 0, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_) {
    if (absl::Status s = executor_->Available(); !s.ok()) return s;
    if (absl::Status s = ValidateTruncateRequest(request, CachedLengths()); !s.ok()) return s;
    for (const auto& item : request.items()) {
      absl::Status s = executor_->Truncate(item.sequence_id(), static_cast<int>(item.length()));
      if (!s.ok()) return s;
      Touch(item.sequence_id());
    }
    return absl::OkStatus();
  });
}

absl::Status WorkerService::DoRelease(const v1::ReleaseRequest& request,
                                      v1::ReleaseResponse* response) {
  return Step(false, 0, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_) {
    uint32_t released = 0;
    for (uint64_t id : request.sequence_ids()) {
      last_touch_.erase(id);
      if (executor_->Release(id).ok()) ++released;
    }
    response->set_released(released);
    return absl::OkStatus();
  });
}

int WorkerService::ExpireLeases(absl::Time now) {
  int expired = 0;
  absl::Status status = Step(false, 0, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_) {
    std::vector<uint64_t> stale;
    for (const auto& [id, touched] : last_touch_) {
      if (now - touched >= options_.lease_timeout) stale.push_back(id);
    }
    for (uint64_t id : stale) {
      last_touch_.erase(id);
      if (executor_->Release(id).ok()) ++expired;
    }
    return absl::OkStatus();
  });
  (void)status;
  if (expired > 0) {
    absl::MutexLock lock(&stats_mu_);
    stats_.set_leases_expired(stats_.leases_expired() + expired);
  }
  return expired;
}

absl::Status WorkerService::DoGetStats(v1::WorkerStats* stats) {
  absl::MutexLock lock(&stats_mu_);
  *stats = stats_;
  stats->set_uptime_ms(static_cast<uint64_t>(absl::ToInt64Milliseconds(absl::Now() - started_)));
  return absl::OkStatus();
}

grpc::Status WorkerService::Describe(grpc::ServerContext*, const v1::DescribeRequest*,
                                     v1::DescribeResponse* response) {
  return ToGrpc(DoDescribe(response));
}

grpc::Status WorkerService::Prefill(grpc::ServerContext*, const v1::PrefillRequest* request,
                                    v1::PrefillResponse* response) {
  return ToGrpc(DoPrefill(*request, response));
}

grpc::Status WorkerService::Draft(grpc::ServerContext*, const v1::DraftRequest* request,
                                  v1::DraftResponse* response) {
  return ToGrpc(DoDraft(*request, response));
}

grpc::Status WorkerService::Verify(grpc::ServerContext*, const v1::VerifyRequest* request,
                                   v1::VerifyResponse* response) {
  return ToGrpc(DoVerify(*request, response));
}

grpc::Status WorkerService::Truncate(grpc::ServerContext*, const v1::TruncateRequest* request,
                                     v1::TruncateResponse*) {
  return ToGrpc(DoTruncate(*request));
}

grpc::Status WorkerService::Release(grpc::ServerContext*, const v1::ReleaseRequest* request,
                                    v1::ReleaseResponse* response) {
  return ToGrpc(DoRelease(*request, response));
}

grpc::Status WorkerService::GetStats(grpc::ServerContext*, const v1::GetStatsRequest*,
                                     v1::WorkerStats* stats) {
  return ToGrpc(DoGetStats(stats));
}

}  // namespace worker
}  // namespace tandem
