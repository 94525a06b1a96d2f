// What the engine needs from one Tandem worker (the draft worker or the target group's
// leader): the tandem.v1.Worker calls with absl::Status results. WorkerClient is the
// gRPC implementation; tests use fakes (coordinator/fake_worker.h).
//
// Status codes follow proto/tandem/v1/worker.proto: UNAVAILABLE / DEADLINE_EXCEEDED
// (and CANCELLED / UNKNOWN from a broken channel) mean the worker could not be reached
// or did not answer in time; NOT_FOUND means it lost the sequence (restarted);
// INVALID_ARGUMENT / RESOURCE_EXHAUSTED / OUT_OF_RANGE mean it rejected the batch it
// was sent. Implementations are thread-safe.
#ifndef TANDEM_COORDINATOR_WORKER_API_H_
#define TANDEM_COORDINATOR_WORKER_API_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::coordinator {

class WorkerApi {
 public:
  virtual ~WorkerApi() = default;

  // "host:port" (or a test name) for messages.
  virtual const std::string& address() const = 0;
  virtual absl::StatusOr<v1::DescribeResponse> Describe() = 0;
  // True when the worker's health service answers SERVING.
  virtual bool IsServing() = 0;
  virtual absl::StatusOr<v1::PrefillResponse> Prefill(const v1::PrefillRequest& request) = 0;
  virtual absl::StatusOr<v1::DraftResponse> Draft(const v1::DraftRequest& request) = 0;
  virtual absl::StatusOr<v1::VerifyResponse> Verify(const v1::VerifyRequest& request) = 0;
  virtual absl::Status Release(const std::vector<uint64_t>& sequence_ids) = 0;
  virtual absl::StatusOr<v1::WorkerStats> GetStats() = 0;
};

// True for the codes that mean "the worker is unreachable or did not answer"
// (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, UNKNOWN, ABORTED), as opposed to an answer
// about the request itself.
bool IsTransportFailure(const absl::Status& status);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_WORKER_API_H_
