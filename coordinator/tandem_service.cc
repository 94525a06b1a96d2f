#include "coordinator/tandem_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace tandem::coordinator {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

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
                             const BearerTokenVerifier* auth)
    : engine_(engine),
      tokenizer_(tokenizer),
      limits_(std::move(limits)),
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

absl::Status TandemService::Start(grpc::ServerContext* context, const v1::GenerateRequest& request,
                                  std::shared_ptr<Sequence>* sequence,
                                  std::shared_ptr<OutputChannel>* channel,
                                  std::string* request_id) {
  absl::StatusOr<ValidatedRequest> valid = ValidateRequest(request, limits_);
  if (!valid.ok()) return valid.status();
  *request_id = valid->request_id;
  std::vector<int32_t> prompt;
  if (valid->prompt_is_text) {
    absl::StatusOr<std::vector<int>> ids = tokenizer_->Encode(valid->prompt_text, true);
    if (!ids.ok()) return ids.status();
    prompt.assign(ids->begin(), ids->end());
  } else {
    prompt = valid->prompt_token_ids;
  }
  absl::StatusOr<int> max_new =
      CheckPromptLength(static_cast<int>(prompt.size()), valid->max_new_tokens, limits_);
  if (!max_new.ok()) return max_new.status();
  *channel = std::make_shared<OutputChannel>();
  absl::StatusOr<std::shared_ptr<Sequence>> seq = engine_->Submit(
      *std::move(valid), std::move(prompt), *max_new, DeadlineOf(context), *channel);
  if (!seq.ok()) return seq.status();
  *sequence = *std::move(seq);
  return absl::OkStatus();
}

grpc::Status TandemService::Generate(grpc::ServerContext* context,
                                     const v1::GenerateRequest* request,
                                     v1::GenerateResponse* response) {
  if (auth_ != nullptr) {
    if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  }
  std::shared_ptr<Sequence> seq;
  std::shared_ptr<OutputChannel> channel;
  std::string request_id;
  absl::Status started = Start(context, *request, &seq, &channel, &request_id);
  if (!started.ok()) return Finish(started);
  response->set_request_id(request_id);
  absl::Status gone;  // Set when the client went away (cancelled or past its deadline).
  for (;;) {
    for (OutputChunk& chunk : channel->Pop(kPollInterval)) {
      response->mutable_text()->append(chunk.text);
      for (int32_t t : chunk.token_ids) response->add_token_ids(t);
      for (float lp : chunk.logprobs) response->add_logprobs(lp);
      if (chunk.final) {
        if (!gone.ok()) return Finish(gone);
        if (!chunk.status.ok()) return Finish(chunk.status);
        response->set_finish_reason(chunk.finish_reason);
        *response->mutable_stats() = chunk.stats;
        return Finish(absl::OkStatus());
      }
    }
    if (gone.ok() && context->IsCancelled()) {
      gone = ClientGoneStatus(context);
      engine_->Cancel(seq);
    }
  }
}

grpc::Status TandemService::GenerateStream(grpc::ServerContext* context,
                                           const v1::GenerateRequest* request,
                                           ResponseWriter<v1::GenerateStreamResponse>* writer) {
  if (auth_ != nullptr) {
    if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  }
  std::shared_ptr<Sequence> seq;
  std::shared_ptr<OutputChannel> channel;
  std::string request_id;
  absl::Status started = Start(context, *request, &seq, &channel, &request_id);
  if (!started.ok()) return Finish(started);
  absl::Status gone;  // Set when the client went away (cancelled or past its deadline).
  for (;;) {
    for (OutputChunk& chunk : channel->Pop(kPollInterval)) {
      if (chunk.final && !gone.ok()) return Finish(gone);
      if (chunk.final && !chunk.status.ok()) return Finish(chunk.status);
      if (gone.ok()) {
        v1::GenerateStreamResponse out;
        out.set_request_id(request_id);
        out.set_text_delta(std::move(chunk.text));
        for (int32_t t : chunk.token_ids) out.add_token_ids(t);
        for (float lp : chunk.logprobs) out.add_logprobs(lp);
        if (chunk.final) {
          out.set_finish_reason(chunk.finish_reason);
          *out.mutable_stats() = chunk.stats;
        }
        if (!writer->Write(out)) {  // The client is gone: cancel, then drain.
          gone = ClientGoneStatus(context);
          engine_->Cancel(seq);
        }
      }
      if (chunk.final) return Finish(gone);
    }
    if (gone.ok() && context->IsCancelled()) {
      gone = ClientGoneStatus(context);
      engine_->Cancel(seq);
    }
  }
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
