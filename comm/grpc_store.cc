#include "comm/grpc_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/rendezvous_service.h"

namespace tandem {
namespace {

// Extra time the RPC deadline allows beyond the server-side wait, for the reply.
absl::Duration ReplySlack(absl::Duration wait) {
  return std::clamp(wait / 10, absl::Milliseconds(500), absl::Seconds(5));
}

void SetDeadline(grpc::ClientContext* context, absl::Duration budget) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + budget));
  context->set_wait_for_ready(true);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcStore>> GrpcStore::Connect(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials,
    absl::Duration set_timeout, std::function<bool()> cancelled) {
  if (address.empty() || address.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous address must be \"host:port\", got \"", address, "\""));
  }
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(
      static_cast<int>(kMaxStoreKeysPerGet * kMaxStoreValueBytes + (1 << 20)));
  return std::make_unique<GrpcStore>(grpc::CreateCustomChannel(address, credentials, args),
                                     set_timeout, std::move(cancelled));
}

GrpcStore::GrpcStore(std::shared_ptr<grpc::Channel> channel, absl::Duration set_timeout,
                     std::function<bool()> cancelled)
    : channel_(std::move(channel)),
      stub_(tandem::v1::Rendezvous::NewStub(channel_)),
      set_timeout_(set_timeout),
      cancelled_(std::move(cancelled)) {}

absl::Status GrpcStore::Set(absl::string_view key, absl::string_view value) {
  if (absl::Status status = ValidateStoreKey(key, "grpc store Set"); !status.ok()) return status;
  if (absl::Status status = ValidateStoreValue(key, value, "grpc store Set"); !status.ok()) {
    return status;
  }
  tandem::v1::SetRequest request;
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  const absl::Time deadline = absl::Now() + set_timeout_;
  absl::Status status;
  while (true) {
    if (cancelled_ && cancelled_()) {
      return absl::CancelledError(
          absl::StrCat("grpc store Set of key '", key.substr(0, 64), "': cancelled"));
    }
    absl::Duration budget = std::max(deadline - absl::Now(), absl::ZeroDuration());
    const bool last = !cancelled_ || budget <= kGrpcStoreCancelCheck;
    if (!last) budget = kGrpcStoreCancelCheck;
    tandem::v1::SetResponse response;
    grpc::ClientContext context;
    SetDeadline(&context, budget);
    status = FromGrpcStatus(stub_->Set(&context, request, &response));
    // A slice that ran out (the server not reachable yet): check and try again.
    if (!last && absl::IsDeadlineExceeded(status)) continue;
    break;
  }
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("grpc store Set of key '", key.substr(0, 64),
                                                    "': ", status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> GrpcStore::Get(const std::vector<std::string>& keys,
                                                        absl::Duration timeout) {
  if (absl::Status status = ValidateStoreKeys(keys, "grpc store Get"); !status.ok()) {
    return status;
  }
  const absl::Time deadline = absl::Now() + std::max(timeout, absl::ZeroDuration());
  tandem::v1::GetRequest request;
  for (const std::string& key : keys) request.add_keys(key);
  while (true) {
    if (cancelled_ && cancelled_()) return absl::CancelledError("grpc store Get: cancelled");
    absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    int64_t wait_ms = std::min<int64_t>(absl::ToInt64Milliseconds(left), kMaxRendezvousWaitMs);
    if (cancelled_) {
      wait_ms = std::min(wait_ms, absl::ToInt64Milliseconds(kGrpcStoreCancelCheck));
    }
    request.set_wait_ms(static_cast<uint32_t>(wait_ms));
    tandem::v1::GetResponse response;
    grpc::ClientContext context;
    SetDeadline(&context, absl::Milliseconds(wait_ms) + ReplySlack(absl::Milliseconds(wait_ms)));
    absl::Status status = FromGrpcStatus(stub_->Get(&context, request, &response));
    if (status.ok()) {
      if (response.values_size() != static_cast<int>(keys.size())) {
        return absl::InternalError(absl::StrCat("grpc store Get: asked for ", keys.size(),
                                                " keys, the server returned ",
                                                response.values_size(), " values"));
      }
      return std::vector<std::string>(response.values().begin(), response.values().end());
    }
    // More budget than one call may wait: ask again.
    if (absl::IsDeadlineExceeded(status) && absl::Now() + absl::Milliseconds(1) < deadline) {
      continue;
    }
    return absl::Status(status.code(), absl::StrCat("grpc store Get: ", status.message()));
  }
}

}  // namespace tandem
