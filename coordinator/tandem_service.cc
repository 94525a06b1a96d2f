#include "coordinator/tandem_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace tandem::coordinator {
namespace {

absl::Time DeadlineOf(grpc::ServerContext* context) {
  auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

// The status the client sees once its call is cancelled: DEADLINE_EXCEEDED when its
// deadline has passed (gRPC ends the call with that code), CANCELLED otherwise. The
// server's deadline is the client's timeout counted from the request's arrival, so it
// runs a little later than the client's own: a cancellation that close to it is the
// client's deadline.
absl::Status ClientGoneStatus(grpc::ServerContext* context) {
  constexpr absl::Duration kDeadlineSkew = absl::Milliseconds(250);
  if (absl::Now() + kDeadlineSkew >= DeadlineOf(context)) {
    return absl::DeadlineExceededError("request deadline exceeded");
  }
  return absl::CancelledError("request cancelled by the client");
}

}  // namespace

TandemService::TandemService(Engine* engine, const Tokenizer* tokenizer, ServerLimits limits,
                             v1::ModelInfo model_info, CoordinatorMetrics* metrics,
                             const BearerTokenVerifier* auth, ChatRenderer chat)
    : engine_(engine),
      submitter_(engine, tokenizer, std::move(limits), std::move(chat)),
      model_info_(std::move(model_info)),
      metrics_(metrics),
      auth_(auth) {
  ParseUnary(this, "Generate", &TandemService::Generate);
  ParseServerStreaming(this, "GenerateStream", &TandemService::GenerateStream);
  ParseUnary(this, "GetModelInfo", &TandemService::GetModelInfo);
  CheckEveryMethodParsed();
}

grpc::Status TandemService::Finish(const absl::Status& status) {
  if (metrics_) metrics_->RecordRequest(status.code());
  return ToGrpcStatus(status);
}

namespace {

// The link to a gRPC client: gone once its call is cancelled or past its deadline.
ClientLink LinkTo(grpc::ServerContext* context, std::function<bool(OutputChunk&)> deliver) {
  return ClientLink{std::move(deliver), [context] { return context->IsCancelled(); },
                    [context] { return ClientGoneStatus(context); }};
}

}  // namespace

grpc::Status TandemService::Generate(grpc::ServerContext* context,
                                     const v1::GenerateRequest* request,
                                     v1::GenerateResponse* response) {
  if (auth_ != nullptr) {
    if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  }
  absl::StatusOr<SubmittedRequest> submitted = submitter_.Submit(*request, DeadlineOf(context));
  if (!submitted.ok()) return Finish(submitted.status());
  response->set_request_id(submitted->request_id);
  return Finish(submitter_.Follow(*submitted, LinkTo(context, [response](OutputChunk& chunk) {
    response->mutable_text()->append(chunk.text);
    for (int32_t t : chunk.token_ids) response->add_token_ids(t);
    for (float lp : chunk.logprobs) response->add_logprobs(lp);
    if (chunk.final) {
      response->set_finish_reason(chunk.finish_reason);
      *response->mutable_stats() = chunk.stats;
    }
    return true;
  })));
}

grpc::Status TandemService::GenerateStream(grpc::ServerContext* context,
                                           const v1::GenerateRequest* request,
                                           ResponseWriter<v1::GenerateStreamResponse>* writer) {
  if (auth_ != nullptr) {
    if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  }
  absl::StatusOr<SubmittedRequest> submitted = submitter_.Submit(*request, DeadlineOf(context));
  if (!submitted.ok()) return Finish(submitted.status());
  const std::string& request_id = submitted->request_id;
  return Finish(submitter_.Follow(*submitted, LinkTo(context, [&](OutputChunk& chunk) {
    v1::GenerateStreamResponse out;
    out.set_request_id(request_id);
    out.set_text_delta(std::move(chunk.text));
    for (int32_t t : chunk.token_ids) out.add_token_ids(t);
    for (float lp : chunk.logprobs) out.add_logprobs(lp);
    if (chunk.final) {
      out.set_finish_reason(chunk.finish_reason);
      *out.mutable_stats() = chunk.stats;
    }
    return writer->Write(out);
  })));
}

grpc::Status TandemService::GetModelInfo(grpc::ServerContext* context,
                                         const v1::GetModelInfoRequest*, v1::ModelInfo* response) {
  if (auth_ != nullptr) {
    if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  }
  *response = model_info_;
  response->set_draft_available(engine_->draft_available());
  // A draft that came up after start-up is described once the engine has seen it.
  if (!response->has_draft()) {
    const ClusterInfo cluster = engine_->cluster();
    if (cluster.draft_described) *response->mutable_draft() = cluster.draft.model();
  }
  return grpc::Status::OK;
}

}  // namespace tandem::coordinator
