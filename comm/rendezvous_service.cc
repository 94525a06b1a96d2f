#include "comm/rendezvous_service.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tandem {

RendezvousService::RendezvousService(size_t max_total_bytes, size_t max_reply_bytes)
    : store_(max_total_bytes), max_reply_bytes_(max_reply_bytes) {}

grpc::Status RendezvousService::Set(grpc::ServerContext* /*context*/,
                                    const tandem::v1::SetRequest* request,
                                    tandem::v1::SetResponse* /*response*/) {
  absl::Status status = store_.Set(request->key(), request->value());
  if (!status.ok()) {
    return ToGrpcStatus(absl::Status(status.code(), absl::StrCat("Rendezvous ", status.message())));
  }
  return grpc::Status::OK;
}

grpc::Status RendezvousService::Get(grpc::ServerContext* context,
                                    const tandem::v1::GetRequest* request,
                                    tandem::v1::GetResponse* response) {
  if (request->wait_ms() > kMaxRendezvousWaitMs) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("Rendezvous.Get: wait_ms must be at most ",
                                     kMaxRendezvousWaitMs, ", got ", request->wait_ms()));
  }
  std::vector<std::string> keys(request->keys().begin(), request->keys().end());
  absl::StatusOr<std::vector<std::string>> values = store_.GetUnlessCancelled(
      keys, absl::Milliseconds(request->wait_ms()), absl::Milliseconds(50),
      [context] { return context->IsCancelled(); });
  if (!values.ok()) {
    return ToGrpcStatus(absl::Status(values.status().code(),
                                     absl::StrCat("Rendezvous ", values.status().message())));
  }
  size_t reply_bytes = 0;
  for (const std::string& value : *values) reply_bytes += value.size();
  if (reply_bytes > max_reply_bytes_) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("Rendezvous.Get: the ", values->size(), " values hold ",
                                     reply_bytes, " bytes, more than the ", max_reply_bytes_,
                                     " bytes one reply may carry; ask for fewer keys per call"));
  }
  for (std::string& value : *values) response->add_values(std::move(value));
  return grpc::Status::OK;
}

void RendezvousService::Shutdown() { store_.Shutdown(); }

}  // namespace tandem
