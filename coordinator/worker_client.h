// Typed client of one Tandem worker (tandem.v1.Worker) with per-call deadlines and
// absl::Status results. Thread-safe (gRPC stubs are).
#ifndef TANDEM_COORDINATOR_WORKER_CLIENT_H_
#define TANDEM_COORDINATOR_WORKER_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/worker_api.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem::coordinator {

struct WorkerClientOptions {
  std::string address;                                    // "host:port"
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null = plaintext
  // With TLS: the name to verify in the worker's certificate instead of the host part
  // of `address` (empty = the host part).
  std::string tls_server_name;
  absl::Duration step_timeout = absl::Seconds(30);    // Prefill/Draft/Verify deadline.
  absl::Duration control_timeout = absl::Seconds(5);  // Describe/Release/Stats/health.
  int max_message_bytes = 64 << 20;
};

class WorkerClient : public WorkerApi {
 public:
  explicit WorkerClient(const WorkerClientOptions& options);

  const std::string& address() const override { return options_.address; }

  absl::StatusOr<v1::DescribeResponse> Describe() override;
  bool IsServing() override;
  absl::StatusOr<v1::PrefillResponse> Prefill(const v1::PrefillRequest& request) override;
  absl::StatusOr<v1::DraftResponse> Draft(const v1::DraftRequest& request) override;
  absl::StatusOr<v1::VerifyResponse> Verify(const v1::VerifyRequest& request) override;
  absl::Status Release(const std::vector<uint64_t>& sequence_ids) override;
  absl::StatusOr<v1::WorkerStats> GetStats() override;

 private:
  WorkerClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Worker::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_WORKER_CLIENT_H_
