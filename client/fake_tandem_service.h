// Test double of tandem.v1.Tandem: deterministic text, configurable pacing, and
// counters of concurrent calls. For client tests only.
#ifndef TANDEM_CLIENT_FAKE_TANDEM_SERVICE_H_
#define TANDEM_CLIENT_FAKE_TANDEM_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/server.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::client::testing {

// GenerateStream answers prompt P with max_new_tokens messages "P#0 ", "P#1 ", ...
// (one token each, `token_delay` apart); the last carries stats (draft: 2 proposals
// per token, half accepted). Prompt "fail" -> INVALID_ARGUMENT; a prompt containing
// "diverge" gets different text under the draft method (a broken server).
class FakeTandemService final : public v1::Tandem::Service {
 public:
  explicit FakeTandemService(absl::Duration token_delay) : token_delay_(token_delay) {}

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        v1::GenerateResponse* response) override;
  grpc::Status GenerateStream(grpc::ServerContext* context, const v1::GenerateRequest* request,
                              grpc::ServerWriter<v1::GenerateStreamResponse>* writer) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response) override;

  int max_in_flight() const { return max_in_flight_.load(); }
  int calls() const { return calls_.load(); }

 private:
  absl::Duration token_delay_;
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
  std::atomic<int> calls_{0};
};

// A FakeTandemService served on a free 127.0.0.1 port and a stub to it; shut down (1 s
// grace) when destroyed. Fails when the server cannot start.
class FakeTandemServer {
 public:
  static absl::StatusOr<std::unique_ptr<FakeTandemServer>> Start(absl::Duration token_delay);
  ~FakeTandemServer();

  FakeTandemService& service() { return service_; }
  v1::Tandem::Stub* stub() { return stub_.get(); }

 private:
  explicit FakeTandemServer(absl::Duration token_delay) : service_(token_delay) {}

  FakeTandemService service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<v1::Tandem::Stub> stub_;
};

}  // namespace tandem::client::testing

#endif  // TANDEM_CLIENT_FAKE_TANDEM_SERVICE_H_
