#include "coordinator/worker_client.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace tandem::coordinator {
namespace {

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
}

// Prefixes errors with the worker address so logs and client messages say which
// worker failed.
absl::Status Annotate(const grpc::Status& status, const std::string& address, const char* call) {
  absl::Status s = FromGrpcStatus(status);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(call, " on worker ", address, ": ", s.message()));
}

}  // namespace

WorkerClient::WorkerClient(const WorkerClientOptions& options) : options_(options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  // Reconnect quickly after a worker restart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  auto creds = options.credentials ? options.credentials : grpc::InsecureChannelCredentials();
  channel_ = grpc::CreateCustomChannel(options.address, creds, args);
  stub_ = v1::Worker::NewStub(channel_);
  health_ = grpc::health::v1::Health::NewStub(channel_);
}

absl::StatusOr<v1::DescribeResponse> WorkerClient::Describe() {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.control_timeout);
  v1::DescribeResponse response;
  grpc::Status st = stub_->Describe(&ctx, v1::DescribeRequest(), &response);
  if (!st.ok()) return Annotate(st, options_.address, "Describe");
  return response;
}

bool WorkerClient::IsServing() {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.control_timeout);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status st = health_->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &response);
  return st.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

absl::StatusOr<v1::PrefillResponse> WorkerClient::Prefill(const v1::PrefillRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.step_timeout);
  v1::PrefillResponse response;
  grpc::Status st = stub_->Prefill(&ctx, request, &response);
  if (!st.ok()) return Annotate(st, options_.address, "Prefill");
  return response;
}

absl::StatusOr<v1::DraftResponse> WorkerClient::Draft(const v1::DraftRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.step_timeout);
  v1::DraftResponse response;
  grpc::Status st = stub_->Draft(&ctx, request, &response);
  if (!st.ok()) return Annotate(st, options_.address, "Draft");
  return response;
}

absl::StatusOr<v1::VerifyResponse> WorkerClient::Verify(const v1::VerifyRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.step_timeout);
  v1::VerifyResponse response;
  grpc::Status st = stub_->Verify(&ctx, request, &response);
  if (!st.ok()) return Annotate(st, options_.address, "Verify");
  return response;
}

absl::Status WorkerClient::Release(const std::vector<uint64_t>& sequence_ids) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.control_timeout);
  v1::ReleaseRequest request;
  for (uint64_t id : sequence_ids) request.add_sequence_ids(id);
  v1::ReleaseResponse response;
  return Annotate(stub_->Release(&ctx, request, &response), options_.address, "Release");
}

absl::StatusOr<v1::WorkerStats> WorkerClient::GetStats() {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.control_timeout);
  v1::WorkerStats response;
  grpc::Status st = stub_->GetStats(&ctx, v1::GetStatsRequest(), &response);
  if (!st.ok()) return Annotate(st, options_.address, "GetStats");
  return response;
}

}  // namespace tandem::coordinator
