#include "coordinator/openai_response.h"

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tandem::coordinator {
namespace {

using json = nlohmann::json;

constexpr char kCodePayload[] = "tandem.openai/code";

// Serialised with invalid UTF-8 (a lone byte token's text) replaced, never thrown on.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

bool IsChat(const OpenAiResponseHeader& header) {
  return header.endpoint == OpenAiEndpoint::kChatCompletions;
}

// The text a token stands for: its piece with SentencePiece's word marker as a space, or
// its byte.
std::string TokenText(const Tokenizer& tokenizer, int32_t id) {
  if (tokenizer.ByteValue(id) >= 0)
    return std::string(1, static_cast<char>(tokenizer.ByteValue(id)));
  return absl::StrReplaceAll(tokenizer.IdToPiece(id), {{"\xE2\x96\x81", " "}});
}

// The choice's "logprobs": chat {"content": [{token, logprob, bytes, top_logprobs}]};
// completions {tokens, token_logprobs, top_logprobs, text_offset}.
json LogprobsJson(const OpenAiResponseHeader& header, const OpenAiOutput& output) {
  if (!header.logprobs) return nullptr;
  const size_t n = std::min(output.token_ids.size(), output.logprobs.size());
  if (IsChat(header)) {
    json content = json::array();
    for (size_t i = 0; i < n; ++i) {
      const std::string text = TokenText(*header.tokenizer, output.token_ids[i]);
      json bytes = json::array();
      for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
      content.push_back({{"token", text},
                         {"logprob", output.logprobs[i]},
                         {"bytes", bytes},
                         {"top_logprobs", json::array()}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), logprobs = json::array(), offsets = json::array();
  size_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string text = TokenText(*header.tokenizer, output.token_ids[i]);
    tokens.push_back(text);
    logprobs.push_back(output.logprobs[i]);
    offsets.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", logprobs},
          {"top_logprobs", nullptr},
          {"text_offset", offsets}};
}

json FinishReasonJson(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_EOS:
    case v1::FINISH_REASON_STOP:
      return "stop";
    default:
      return nullptr;
  }
}

json Envelope(const OpenAiResponseHeader& header, bool chunk) {
  const char* object =
      IsChat(header) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", header.id},
          {"object", object},
          {"created", header.created},
          {"model", header.model},
          {"system_fingerprint", nullptr}};
}

json UsageObject(int prompt_tokens, const v1::RequestStats& stats) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string stats_json;
  (void)google::protobuf::util::MessageToJsonString(stats, &stats_json, options);
  const int completion = static_cast<int>(stats.generated_tokens());
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", prompt_tokens + completion},
          {"tandem", json::parse(stats_json, nullptr, false)}};
}

std::string Event(const json& data) { return absl::StrCat("data: ", Dump(data), "\n\n"); }

}  // namespace

std::string CompletionBody(const OpenAiResponseHeader& header, const OpenAiOutput& output,
                           int prompt_tokens, const v1::RequestStats& stats) {
  json choice = {{"index", 0},
                 {"logprobs", LogprobsJson(header, output)},
                 {"finish_reason", FinishReasonJson(output.finish_reason)}};
  if (IsChat(header)) {
    choice["message"] = {{"role", "assistant"}, {"content", output.text}};
  } else {
    choice["text"] = output.text;
  }
  json body = Envelope(header, false);
  body["choices"] = json::array({choice});
  body["usage"] = UsageObject(prompt_tokens, stats);
  return Dump(body);
}

std::string StreamChunkEvent(const OpenAiResponseHeader& header, const OpenAiOutput& delta,
                             bool first, bool include_usage) {
  json choice = {{"index", 0},
                 {"logprobs", LogprobsJson(header, delta)},
                 {"finish_reason", FinishReasonJson(delta.finish_reason)}};
  if (IsChat(header)) {
    json message = {{"content", delta.text}};
    if (first) message["role"] = "assistant";
    choice["delta"] = message;
  } else {
    choice["text"] = delta.text;
  }
  json body = Envelope(header, true);
  body["choices"] = json::array({choice});
  if (include_usage) body["usage"] = nullptr;
  return Event(body);
}

std::string StreamUsageEvent(const OpenAiResponseHeader& header, int prompt_tokens,
                             const v1::RequestStats& stats) {
  json body = Envelope(header, true);
  body["choices"] = json::array();
  body["usage"] = UsageObject(prompt_tokens, stats);
  return Event(body);
}

std::string StreamDoneEvent() { return "data: [DONE]\n\n"; }

std::string UsageJson(int prompt_tokens, const v1::RequestStats& stats) {
  return Dump(UsageObject(prompt_tokens, stats));
}

std::string ModelListBody(const std::string& model, int64_t created) {
  json entry = {{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "tandem"}};
  return Dump({{"object", "list"}, {"data", json::array({entry})}});
}

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

absl::Status WithErrorCode(absl::Status status, absl::string_view code) {
  status.SetPayload(kCodePayload, absl::Cord(code));
  return status;
}

std::string ErrorBody(const absl::Status& status) {
  const int http = HttpStatusOf(status);
  const char* type = http == 401   ? "authentication_error"
                     : http == 403 ? "permission_error"
                     : http == 429 ? "rate_limit_error"
                     : http < 500  ? "invalid_request_error"
                                   : "server_error";
  absl::optional<absl::Cord> code = status.GetPayload(kCodePayload);
  const std::string param = ParamOf(status);
  json error = {{"message", std::string(status.message())},
                {"type", type},
                {"param", param.empty() ? json(nullptr) : json(param)},
                {"code", code ? json(std::string(*code)) : json(nullptr)}};
  return Dump({{"error", error}});
}

}  // namespace tandem::coordinator
