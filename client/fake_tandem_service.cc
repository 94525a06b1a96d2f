#include "client/fake_tandem_service.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tandem::client::testing {

grpc::Status FakeTandemService::Generate(grpc::ServerContext*, const v1::GenerateRequest*,
                                         v1::GenerateResponse*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "fake: use GenerateStream");
}

grpc::Status FakeTandemService::GenerateStream(
    grpc::ServerContext* context, const v1::GenerateRequest* request,
    grpc::ServerWriter<v1::GenerateStreamResponse>* writer) {
  ++calls_;
  const int now = ++in_flight_;
  int seen = max_in_flight_.load();
  while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
  }
  struct Leave {
    std::atomic<int>* counter;
    ~Leave() { --*counter; }
  } leave{&in_flight_};
  if (request->text() == "fail") {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "fake: bad prompt");
  }
  const bool draft = request->speculation().method() == v1::SPECULATION_METHOD_DRAFT;
  const bool diverge = draft && absl::StrContains(request->text(), "diverge");
  const int n = static_cast<int>(std::max<uint32_t>(1, request->max_new_tokens()));
  for (int i = 0; i < n; ++i) {
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
    absl::SleepFor(token_delay_);
    v1::GenerateStreamResponse message;
    message.set_text_delta(absl::StrCat(request->text(), "#", diverge ? i + 1 : i, " "));
    message.add_token_ids(i);
    if (i == n - 1) {
      message.set_finish_reason(v1::FINISH_REASON_LENGTH);
      v1::RequestStats* stats = message.mutable_stats();
      stats->set_generated_tokens(n);
      stats->set_method(request->speculation().method());
      if (draft) {
        stats->set_draft_tokens_proposed(2 * n);
        stats->set_draft_tokens_accepted(n);
        stats->set_acceptance_rate(0.5f);
        stats->set_mean_accepted_length(2.0f);
        stats->set_target_steps((n + 1) / 2);
      } else {
        stats->set_mean_accepted_length(1.0f);
        stats->set_target_steps(n);
      }
    }
    if (!writer->Write(message)) return grpc::Status::CANCELLED;
  }
  return grpc::Status::OK;
}

grpc::Status FakeTandemService::GetModelInfo(grpc::ServerContext*, const v1::GetModelInfoRequest*,
                                             v1::ModelInfo* response) {
  response->mutable_target()->set_name("fake-target");
  response->mutable_target()->set_tensor_parallel_size(2);
  response->mutable_draft()->set_name("fake-draft");
  response->set_draft_available(true);
  response->set_max_new_tokens_limit(64);
  response->set_eos_token_id(2);
  response->add_stop_token_ids(2);
  response->add_stop_token_ids(7);
  response->mutable_default_sampling()->set_temperature(0.7f);
  response->mutable_default_sampling()->set_top_p(0.9f);
  response->mutable_default_sampling()->set_top_k(40);
  for (auto m : {v1::SPECULATION_METHOD_AUTO, v1::SPECULATION_METHOD_NONE,
                 v1::SPECULATION_METHOD_DRAFT, v1::SPECULATION_METHOD_PROMPT_LOOKUP}) {
    response->add_methods(m);
  }
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<FakeTandemServer>> FakeTandemServer::Start(
    absl::Duration token_delay) {
  std::unique_ptr<FakeTandemServer> f(new FakeTandemServer(token_delay));
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = GrpcServer::Start(options, {&f->service_});
  if (!server.ok()) return server.status();
  f->server_ = *std::move(server);
  f->stub_ = v1::Tandem::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(f->server_->port()), grpc::InsecureChannelCredentials()));
  return f;
}

FakeTandemServer::~FakeTandemServer() {
  if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
}

}  // namespace tandem::client::testing
