// What `tandem generate` gathers from one streamed request, and its --json form.
#ifndef TANDEM_CLIENT_GENERATE_RESULT_H_
#define TANDEM_CLIENT_GENERATE_RESULT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/v1/tandem.pb.h"

namespace tandem::client {

struct GenerateResult {
  std::string request_id;
  std::string text;
  std::vector<int32_t> token_ids;  // When the request asked for them.
  std::vector<float> logprobs;     // One per token id, when asked for.
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::RequestStats stats;
  bool has_stats = false;     // The last message (with stats) arrived.
  double client_seconds = 0;  // Wall time seen by the client.
};

// Adds one GenerateStream message to `result`.
void AddStreamMessage(const v1::GenerateStreamResponse& message, GenerateResult* result);

// One JSON object: {"request_id", "text", "token_ids", "logprobs", "finish_reason"
// ("length" | "eos" | "stop"), "stats" (tandem.v1.RequestStats as proto JSON, field names
// as in the proto), "client_seconds"}.
std::string GenerateResultJson(const GenerateResult& result);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_GENERATE_RESULT_H_
