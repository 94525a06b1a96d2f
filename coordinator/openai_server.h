// The OpenAI-compatible HTTP API, served inside the coordinator (docs/architecture.md,
// "OpenAI-compatible HTTP API", says why there and not in a gateway):
//   POST /v1/completions, POST /v1/chat/completions  (whole, or server-sent events)
//   GET  /v1/models, GET /v1/models/{id}, GET /health
// Requests become tandem.v1.GenerateRequests (coordinator/openai_request.h) run through
// the same RequestSubmitter as the gRPC API, which renders chat prompts with the model's
// chat template (a model without one answers 400 "model has no chat template"). The /v1
// endpoints require the gRPC API's bearer token when one is set; /health is open. Errors
// are OpenAI-shaped JSON with a 4xx or 5xx status (coordinator/openai_response.h); a body
// over max_body_bytes is 413.
//
// Cancellation: a client that disconnects is noticed within two heartbeat intervals
// (the server writes an SSE comment, or for a whole response a space before the JSON,
// when it has written nothing for that long; the second write after the peer closed
// fails), and its request is cancelled in the engine, which frees its KV caches.
// A whole (non-streaming) response is sent chunked with status 200 once the request is
// admitted; an error after that point is the body's {"error": ...}.
#ifndef TANDEM_COORDINATOR_OPENAI_SERVER_H_
#define TANDEM_COORDINATOR_OPENAI_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "coordinator/metrics.h"
#include "coordinator/openai_request.h"
#include "coordinator/request_submitter.h"

namespace httplib {
class DataSink;
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tandem::coordinator {

struct OpenAiExchange;

struct OpenAiServerOptions {
  std::string listen_address;       // host:port; port 0 picks a free one.
  size_t max_body_bytes = 4 << 20;  // Larger request bodies: 413.
  int threads = 64;                 // Connections served at once (one per request).
  absl::Duration heartbeat = absl::Milliseconds(250);  // See the file comment.
  std::string model_name;         // What /v1/models lists and requests must name.
  std::function<bool()> healthy;  // /health's answer; null = always healthy.
};

class OpenAiServer {
 public:
  // Binds and starts serving. `submitter` must outlive the server; `auth` (null: open)
  // and `metrics` (null: none; else every request's outcome is counted in
  // tandem_requests_total) too. INVALID_ARGUMENT for a bad address, UNAVAILABLE when it
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<OpenAiServer>> Start(OpenAiServerOptions options,
                                                             const RequestSubmitter* submitter,
                                                             const BearerTokenVerifier* auth,
                                                             CoordinatorMetrics* metrics);
  ~OpenAiServer();  // Stops: requests in flight are cut off, then cancelled.

  int port() const { return port_; }

 private:
  OpenAiServer(OpenAiServerOptions options, const RequestSubmitter* submitter,
               const BearerTokenVerifier* auth, CoordinatorMetrics* metrics);
  void Route();
  void Generate(OpenAiEndpoint endpoint, const httplib::Request& req, httplib::Response& res);
  // Follows an admitted request and writes its response (content provider).
  bool Respond(OpenAiExchange& exchange, httplib::DataSink& sink);
  // Writes `status` as the response, counting it.
  void Fail(const absl::Status& status, httplib::Response& res);
  absl::Status CheckAuth(const httplib::Request& req) const;
  absl::Status CheckModel(const std::string& model) const;

  const OpenAiServerOptions options_;
  const RequestSubmitter* submitter_;
  const BearerTokenVerifier* auth_;
  CoordinatorMetrics* metrics_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::thread listener_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_OPENAI_SERVER_H_
