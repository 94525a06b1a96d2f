// Store client for the tandem.v1.Rendezvous gRPC service (hosted by the coordinator),
// so ranks on different machines can rendezvous.
//
// Calls wait for the channel to become ready (the server may still be starting) up to
// the call's time budget. Get waits server-side; budgets over the protocol's 600 s
// per-call maximum are split into several calls. With a `cancelled` predicate, Set and
// Get run as calls of at most kGrpcStoreCancelCheck each (a Set is idempotent) and give
// up with CANCELLED once it returns true, so a caller that is shutting down never waits
// out a whole budget for a server that is gone.
#ifndef TANDEM_COMM_GRPC_STORE_H_
#define TANDEM_COMM_GRPC_STORE_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/store.h"
#include "tandem/v1/rendezvous.grpc.pb.h"

namespace tandem {

// How often a GrpcStore with a `cancelled` predicate checks it while a call waits.
inline constexpr absl::Duration kGrpcStoreCancelCheck = absl::Milliseconds(200);

class GrpcStore final : public Store {
 public:
  // `address` is "host:port". Null credentials mean plaintext. `set_timeout` bounds
  // each Set (including waiting for the server to come up). `cancelled` (optional,
  // thread-safe): see above.
  static absl::StatusOr<std::unique_ptr<GrpcStore>> Connect(
      const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
      absl::Duration set_timeout = absl::Seconds(30), std::function<bool()> cancelled = nullptr);

  // Uses an existing channel.
  explicit GrpcStore(std::shared_ptr<grpc::Channel> channel,
                     absl::Duration set_timeout = absl::Seconds(30),
                     std::function<bool()> cancelled = nullptr);

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tandem::v1::Rendezvous::Stub> stub_;
  absl::Duration set_timeout_;
  std::function<bool()> cancelled_;
};

}  // namespace tandem

#endif  // TANDEM_COMM_GRPC_STORE_H_
