// Issues streamed generation requests against a Tandem server from a fixed number of
// client threads, and measures each one as the client sees it.
#ifndef TANDEM_CLIENT_LOAD_RUNNER_H_
#define TANDEM_CLIENT_LOAD_RUNNER_H_

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::client {

// One finished request (successful or not).
struct RequestResult {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string error;       // Status message when not OK.
  std::string text;        // Concatenated text deltas.
  double latency_ms = 0;   // Send to end of stream.
  double ttft_ms = 0;      // Send to the first message carrying text or tokens.
  double tpot_ms = 0;      // (last - first token message) / (tokens - 1); NaN if < 2.
  bool has_stats = false;  // The final message carried stats.
  v1::RequestStats stats;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
};

// Runs one GenerateStream call to completion (or `timeout`).
RequestResult StreamOne(v1::Tandem::Stub* stub, const v1::GenerateRequest& request,
                        absl::Duration timeout);

struct LoadSpec {
  int concurrency = 1;      // Requests in flight at once (client threads).
  int requests = 1;         // Total requests, when duration is zero.
  absl::Duration duration;  // Non-zero: keep issuing until it passes (soak).
  absl::Duration request_timeout = absl::Minutes(10);
};

// Issues requests number 0, 1, ... built by `make_request(number)` until `requests`
// are issued (or `duration` passes, or `*stop` becomes true), at most `concurrency`
// at a time, and calls `on_result(number, result)` for each, serialised (never two at
// once). Returns when every issued request has finished.
void RunLoad(v1::Tandem::Stub* stub, const LoadSpec& spec,
             const std::function<v1::GenerateRequest(int number)>& make_request,
             const std::function<void(int number, const RequestResult& result)>& on_result,
             const std::atomic<bool>* stop = nullptr);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_LOAD_RUNNER_H_
