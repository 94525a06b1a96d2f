// Server side of tandem.v1.Rendezvous: an in-memory key-value map that the ranks of a
// target group use to exchange addresses and ids (hosted by the coordinator).
//
// Set stores a value (key 1..512 bytes, value <= 1 MiB, else INVALID_ARGUMENT). Get
// returns the values of 1..64 keys in key order, waiting up to wait_ms (<= 600000)
// until all exist, else DEADLINE_EXCEEDED; a caller that cancels stops the wait within
// ~50 ms. Memory is bounded: the total size of keys and values held is capped
// (RESOURCE_EXHAUSTED beyond it), and so is the size of one Get reply (64 values of
// 1 MiB would not fit the server's message limit; RESOURCE_EXHAUSTED asks for fewer
// keys per call). Keys live until the service is destroyed; callers
// namespace them with a run id.
#ifndef TANDEM_COMM_RENDEZVOUS_SERVICE_H_
#define TANDEM_COMM_RENDEZVOUS_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>

#include "comm/store.h"
#include "common/grpc_status.h"
#include "tandem/v1/rendezvous.grpc.pb.h"

namespace tandem {

inline constexpr uint32_t kMaxRendezvousWaitMs = 600000;

class RendezvousService final : public tandem::v1::Rendezvous::Service {
 public:
  // `max_total_bytes`: keys and values held; `max_reply_bytes`: values in one Get
  // reply (keep it below the hosting server's max message size).
  explicit RendezvousService(size_t max_total_bytes = size_t{256} << 20,
                             size_t max_reply_bytes = size_t{60} << 20);

  grpc::Status Set(grpc::ServerContext* context, const tandem::v1::SetRequest* request,
                   tandem::v1::SetResponse* response) override;
  grpc::Status Get(grpc::ServerContext* context, const tandem::v1::GetRequest* request,
                   tandem::v1::GetResponse* response) override;

  // Ends every waiting Get with UNAVAILABLE and refuses later calls. Call before
  // shutting the server down so that no handler keeps it waiting.
  void Shutdown();

  // Number of keys held (for metrics and tests).
  size_t num_keys() const { return store_.num_keys(); }

 private:
  InMemoryStore store_;
  const size_t max_reply_bytes_;
};

}  // namespace tandem

#endif  // TANDEM_COMM_RENDEZVOUS_SERVICE_H_
