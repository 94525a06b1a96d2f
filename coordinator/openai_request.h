// Parsing of OpenAI-compatible request bodies (POST /v1/completions and
// /v1/chat/completions) into tandem.v1.GenerateRequests (docs/architecture.md, "OpenAI-
// compatible HTTP API", lists the mapping and what is refused).
//
// Omitted sampling fields take the model's generation_config.json defaults, as in vLLM's
// OpenAI server (coordinator/request_sampling.h); where the model states no temperature,
// OpenAI's default 1 applies (ApplyOpenAiTemperatureDefault). max_tokens defaults to 16
// for completions as in OpenAI (the server's default for chat). Extensions: `top_k`,
// `ignore_eos`, and
// `speculation`, a tandem.v1.SpeculationParams in proto JSON whose enum values may also
// be given short ("draft", "greedy", "off").
//
// Every refusal is INVALID_ARGUMENT with one message naming the field; the field's name
// is also carried for the error body's "param" (ParamOf).
#ifndef TANDEM_COORDINATOR_OPENAI_REQUEST_H_
#define TANDEM_COORDINATOR_OPENAI_REQUEST_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/request_sampling.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::coordinator {

enum class OpenAiEndpoint { kCompletions, kChatCompletions };

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  std::string model;  // As sent; the server checks it names its model.
  // What the engine runs. A chat request's messages are its `chat` prompt (roles
  // "system", "user", "assistant"; "developer" is read as "system"; text parts joined),
  // which the server renders with the model's chat template.
  v1::GenerateRequest generate;
  bool stream = false;         // Server-sent events.
  bool include_usage = false;  // stream_options.include_usage.
  bool logprobs = false;       // Return the chosen tokens' log-probabilities.
};

// Parses `body` (JSON) for `endpoint`. INVALID_ARGUMENT for malformed JSON, a field of
// the wrong type or range, an unknown role, and OpenAI features Tandem does not serve
// (n > 1, echo, suffix, penalties, logit_bias, tools, alternatives in logprobs).
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, absl::string_view body);

// OpenAI's temperature for a body that omits it, where the model states none.
inline constexpr float kOpenAiDefaultTemperature = 1.0f;

// Sets the temperature of a `request` from a body that omitted it (no-op when set):
// TemperatureWhenUnset(defaults, kOpenAiDefaultTemperature). The other omitted fields
// stay unset and take the model's defaults in validation.
void ApplyOpenAiTemperatureDefault(const RequestSamplingDefaults& defaults,
                                   v1::GenerateRequest* request);

// The request field a status from ParseOpenAiRequest names ("" when none).
std::string ParamOf(const absl::Status& status);

// `status` with `param` attached for ParamOf.
absl::Status WithParam(absl::Status status, absl::string_view param);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_OPENAI_REQUEST_H_
