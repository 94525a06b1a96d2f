// Bodies of the OpenAI-compatible HTTP API's responses: completions and chat completions
// (whole or as server-sent events), usage with Tandem's request statistics, the model
// list, and errors in OpenAI's shape {"error": {"message", "type", "param", "code"}}.
#ifndef TANDEM_COORDINATOR_OPENAI_RESPONSE_H_
#define TANDEM_COORDINATOR_OPENAI_RESPONSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/openai_request.h"
#include "model/tokenizer.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::coordinator {

// What every response of one request repeats.
struct OpenAiResponseHeader {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  std::string id;       // "cmpl-<request id>" / "chatcmpl-<request id>".
  std::string model;    // The served model's name.
  int64_t created = 0;  // Unix seconds.
  bool logprobs = false;
  const Tokenizer* tokenizer = nullptr;  // Token texts of logprobs; must outlive uses.
};

// Output gathered so far (a whole completion, or one streamed delta).
struct OpenAiOutput {
  std::string text;
  std::vector<int32_t> token_ids;  // With logprobs.
  std::vector<float> logprobs;     // One per token id.
  // FINISH_REASON_UNSPECIFIED until the request has ended.
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
};

// The whole response of a non-streaming request (JSON text).
std::string CompletionBody(const OpenAiResponseHeader& header, const OpenAiOutput& output,
                           int prompt_tokens, const v1::RequestStats& stats);

// One server-sent event "data: {chunk}\n\n" carrying a streamed delta; `first` adds the
// assistant role to a chat chunk's delta. Usage is null in it.
std::string StreamChunkEvent(const OpenAiResponseHeader& header, const OpenAiOutput& delta,
                             bool first, bool include_usage);

// The event after the last chunk with stream_options.include_usage: no choices, usage.
std::string StreamUsageEvent(const OpenAiResponseHeader& header, int prompt_tokens,
                             const v1::RequestStats& stats);

// The stream's end marker, "data: [DONE]\n\n".
std::string StreamDoneEvent();

// {"prompt_tokens", "completion_tokens", "total_tokens", "tandem": RequestStats as proto
// JSON (acceptance rate, accepted length, method, timings...)} as JSON text.
std::string UsageJson(int prompt_tokens, const v1::RequestStats& stats);

// GET /v1/models: the one served model.
std::string ModelListBody(const std::string& model, int64_t created);

// The HTTP status of a request that ended with `status` (400, 401, 404, 413, 429, 503,
// 504, 500, ...).
int HttpStatusOf(const absl::Status& status);

// {"error": {...}}: the status's message, an OpenAI error type for its code, the param
// ParamOf names (null when none) and a code (null, or e.g. "model_not_found").
std::string ErrorBody(const absl::Status& status);

// `status` marked with an OpenAI error code for ErrorBody (e.g. "model_not_found").
absl::Status WithErrorCode(absl::Status status, absl::string_view code);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_OPENAI_RESPONSE_H_
