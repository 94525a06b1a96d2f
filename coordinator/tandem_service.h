// tandem.v1.Tandem: the public API. Validates and tokenises requests, hands them to
// the Engine, and returns or streams their output. Thread-safe; one handler thread
// per call (gRPC's synchronous server). Requests are parsed by ParsingService: a
// malformed one answers INVALID_ARGUMENT "request could not be parsed as ...".
#ifndef TANDEM_COORDINATOR_TANDEM_SERVICE_H_
#define TANDEM_COORDINATOR_TANDEM_SERVICE_H_

#include "common/auth.h"
#include "common/request_parsing.h"
#include "coordinator/engine.h"
#include "coordinator/metrics.h"
#include "coordinator/request_submitter.h"
#include "coordinator/request_validation.h"
#include "model/tokenizer.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::coordinator {

class TandemService final : public ParsingService<v1::Tandem> {
 public:
  // `engine` must be started; all pointers must outlive the service. `metrics` may be
  // null. `model_info` is what GetModelInfo reports (draft_available is live).
  // `auth` (may be null: no authentication) is checked first by every method; calls
  // without its token end UNAUTHENTICATED. `chat` renders chat prompts (null: the model
  // has no chat template).
  TandemService(Engine* engine, const Tokenizer* tokenizer, ServerLimits limits,
                v1::ModelInfo model_info, CoordinatorMetrics* metrics,
                const BearerTokenVerifier* auth = nullptr, ChatRenderer chat = nullptr);

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        v1::GenerateResponse* response) override;
  grpc::Status GenerateStream(grpc::ServerContext* context, const v1::GenerateRequest* request,
                              ResponseWriter<v1::GenerateStreamResponse>* writer);
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response) override;

 private:
  grpc::Status Finish(const absl::Status& status);

  Engine* engine_;
  const RequestSubmitter submitter_;
  const v1::ModelInfo model_info_;
  CoordinatorMetrics* metrics_;
  const BearerTokenVerifier* auth_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_TANDEM_SERVICE_H_
