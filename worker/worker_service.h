// tandem.v1.Worker over a ModelExecutor (one process, or the leader of a
// tensor-parallel target group).
//
// * Requests are parsed by ParsingService (a malformed one answers INVALID_ARGUMENT
//   "request could not be parsed as ..."), then validated (request_validation.h); bad
//   input never crashes and gets the status code of the protocol. Draft on a target worker and
//   Verify on a draft worker are FAILED_PRECONDITION; steps while the target group is regrouping
//   are UNAVAILABLE.
// * Steps (Prefill, Draft, Verify, Truncate, Release) are serialized: one model call at
//   a time. Describe and GetStats never wait for a step.
// * Leases: a background thread releases sequences untouched for lease_timeout (through
//   the executor, so group followers release too), so a restarted coordinator leaks
//   nothing.
// * Stats: busy (inside step handlers), compute (forward passes minus collectives) and
//   collective time, KV blocks, leases expired, and an instance id that is random per
//   process start.
#ifndef TANDEM_WORKER_WORKER_SERVICE_H_
#define TANDEM_WORKER_WORKER_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/request_parsing.h"
#include "tandem/v1/worker.grpc.pb.h"
#include "worker/draft_engine.h"
#include "worker/model_executor.h"
#include "worker/request_validation.h"
#include "worker/target_engine.h"

namespace tandem {
namespace worker {

struct WorkerServiceOptions {
  v1::WorkerRole role = v1::WORKER_ROLE_TARGET;
  int max_speculative_tokens = 16;
  int proposal_top_k = 32;  // Draft default when a request gives 0.
  absl::Duration lease_timeout = absl::Seconds(120);
  std::string model_name;       // Reported in Describe.
  bool synthetic = false;       // Random weights (--synthetic): NOT a model.
  std::string backend = "cpu";  // Compute backend, reported in Describe.
  // Target-leader proposers served besides the built-in ones (Lookahead) (borrowed,
  // must outlive the service; null = none: Medusa when the model has heads); all are
  // listed in Describe's target_methods.
  const TargetProposers* target_proposers = nullptr;
};

class WorkerService final : public ParsingService<v1::Worker> {
 public:
  // `executor` is borrowed and must outlive the service.
  WorkerService(ModelExecutor* executor, const WorkerServiceOptions& options);
  ~WorkerService() override;

  // Starts / stops the lease thread. Stop() is idempotent and also called by the
  // destructor.
  void StartLeaseReaper();
  void Stop();

  // The RPCs without gRPC around them (tests call these directly).
  absl::Status DoDescribe(v1::DescribeResponse* response);
  absl::Status DoPrefill(const v1::PrefillRequest& request, v1::PrefillResponse* response);
  absl::Status DoDraft(const v1::DraftRequest& request, v1::DraftResponse* response);
  absl::Status DoVerify(const v1::VerifyRequest& request, v1::VerifyResponse* response);
  absl::Status DoTruncate(const v1::TruncateRequest& request);
  absl::Status DoRelease(const v1::ReleaseRequest& request, v1::ReleaseResponse* response);
  absl::Status DoGetStats(v1::WorkerStats* stats);
  // Releases sequences untouched for lease_timeout as of `now`; returns how many.
  int ExpireLeases(absl::Time now);

  grpc::Status Describe(grpc::ServerContext*, const v1::DescribeRequest*,
                        v1::DescribeResponse* response) override;
  grpc::Status Prefill(grpc::ServerContext*, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override;
  grpc::Status Draft(grpc::ServerContext*, const v1::DraftRequest* request,
                     v1::DraftResponse* response) override;
  grpc::Status Verify(grpc::ServerContext*, const v1::VerifyRequest* request,
                      v1::VerifyResponse* response) override;
  grpc::Status Truncate(grpc::ServerContext*, const v1::TruncateRequest* request,
                        v1::TruncateResponse* response) override;
  grpc::Status Release(grpc::ServerContext*, const v1::ReleaseRequest* request,
                       v1::ReleaseResponse* response) override;
  grpc::Status GetStats(grpc::ServerContext*, const v1::GetStatsRequest*,
                        v1::WorkerStats* stats) override;

  const std::string& instance_id() const { return instance_id_; }

 private:
  // Runs `body` as one serialized step: availability check, timing, stats.
  template <typename Body>
  absl::Status Step(bool counts_as_model_step, int64_t positions, Body&& body);
  void Touch(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_);
  void UpdateSnapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_);
  CachedLengthFn CachedLengths();

  ModelExecutor* executor_;
  const WorkerServiceOptions options_;
  const std::string instance_id_;
  const absl::Time started_;
  RequestLimits limits_;
  v1::DescribeResponse description_;  // Fixed at construction.

  absl::Mutex step_mu_;
  // The target-side proposers served (next_candidates): Lookahead, and those of
  // options.target_proposers.
  const TargetProposers target_proposers_;
  DraftEngine draft_engine_ ABSL_GUARDED_BY(step_mu_);
  TargetEngine target_engine_ ABSL_GUARDED_BY(step_mu_);
  absl::flat_hash_map<uint64_t, absl::Time> last_touch_ ABSL_GUARDED_BY(step_mu_);

  mutable absl::Mutex stats_mu_;
  v1::WorkerStats stats_ ABSL_GUARDED_BY(stats_mu_);

  absl::Mutex lease_mu_;
  absl::CondVar lease_wake_;
  bool lease_stop_ ABSL_GUARDED_BY(lease_mu_) = false;
  std::thread lease_thread_;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_WORKER_SERVICE_H_
