#include "coordinator/openai_request.h"

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/chat_prompt.h"

namespace tandem::coordinator {
namespace {

using json = nlohmann::json;

constexpr char kParamPayload[] = "tandem.openai/param";

absl::Status Invalid(absl::string_view param, absl::string_view message) {
  return WithParam(absl::InvalidArgumentError(absl::StrCat(param, ": ", message)), param);
}

// The field `name` of `body`, or nullopt when absent or null.
std::optional<json> Field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  return *it;
}

// Whether `object` is an object whose field "type" is the string `type`.
bool HasType(const json& object, const char* type) {
  if (!object.is_object()) return false;
  auto it = object.find("type");
  return it != object.end() && it->is_string() && it->get<std::string>() == type;
}

absl::Status ReadBool(const json& body, const char* name, bool* out) {
  std::optional<json> v = Field(body, name);
  if (!v) return absl::OkStatus();
  if (!v->is_boolean()) return Invalid(name, "must be a boolean");
  *out = v->get<bool>();
  return absl::OkStatus();
}

absl::Status ReadInt(const json& body, const char* name, int64_t min, int64_t max,
                     std::optional<int64_t>* out) {
  std::optional<json> v = Field(body, name);
  if (!v) return absl::OkStatus();
  if (!v->is_number_integer()) return Invalid(name, "must be an integer");
  const bool in_range =
      v->is_number_unsigned()
          ? v->get<uint64_t>() <= static_cast<uint64_t>(max) && v->get<int64_t>() >= min
          : v->get<int64_t>() >= min && v->get<int64_t>() <= max;
  if (!in_range) return Invalid(name, absl::StrCat("must be in [", min, ", ", max, "]"));
  *out = v->get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadNumber(const json& body, const char* name, std::optional<double>* out) {
  std::optional<json> v = Field(body, name);
  if (!v) return absl::OkStatus();
  if (!v->is_number()) return Invalid(name, "must be a number");
  *out = v->get<double>();
  return absl::OkStatus();
}

// OpenAI features Tandem does not serve: present only with their neutral value.
absl::Status RefuseUnsupported(const json& body) {
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    std::optional<double> v;
    if (absl::Status s = ReadNumber(body, name, &v); !s.ok()) return s;
    if (v && *v != 0) return Invalid(name, "is not supported (only 0)");
  }
  for (const char* name : {"n", "best_of"}) {
    std::optional<int64_t> v;
    if (absl::Status s = ReadInt(body, name, 1, 1, &v); !s.ok()) {
      return Invalid(name, "only 1 is supported");
    }
  }
  bool echo = false;
  if (absl::Status s = ReadBool(body, "echo", &echo); !s.ok()) return s;
  if (echo) return Invalid("echo", "is not supported");
  if (std::optional<json> v = Field(body, "suffix"); v && !(v->is_string() && v->empty())) {
    return Invalid("suffix", "is not supported");
  }
  if (std::optional<json> v = Field(body, "logit_bias"); v && !(v->is_object() && v->empty())) {
    return Invalid("logit_bias", "is not supported");
  }
  for (const char* name : {"tools", "tool_choice", "functions", "function_call"}) {
    if (Field(body, name)) return Invalid(name, "tool calling is not supported");
  }
  if (std::optional<json> v = Field(body, "response_format"); v && !HasType(*v, "text")) {
    return Invalid("response_format", "only {\"type\": \"text\"} is supported");
  }
  return absl::OkStatus();
}

absl::Status ReadStop(const json& body, v1::GenerateRequest* out) {
  std::optional<json> v = Field(body, "stop");
  if (!v) return absl::OkStatus();
  if (v->is_string()) {
    out->add_stop(v->get<std::string>());
    return absl::OkStatus();
  }
  if (!v->is_array()) return Invalid("stop", "must be a string or an array of strings");
  for (const json& s : *v) {
    if (!s.is_string()) return Invalid("stop", "must be a string or an array of strings");
    out->add_stop(s.get<std::string>());
  }
  return absl::OkStatus();
}

// Short enum names ("draft") become their proto JSON names ("SPECULATION_METHOD_DRAFT").
void ExpandEnumNames(json& speculation) {
  const std::pair<const char*, const char*> prefixes[] = {{"method", "SPECULATION_METHOD_"},
                                                          {"acceptance_rule", "ACCEPTANCE_RULE_"},
                                                          {"acceptanceRule", "ACCEPTANCE_RULE_"},
                                                          {"pipelining", "PIPELINING_"}};
  for (const auto& [field, prefix] : prefixes) {
    auto it = speculation.find(field);
    if (it == speculation.end() || !it->is_string()) continue;
    std::string value = it->get<std::string>();
    if (!absl::StartsWith(value, prefix)) *it = absl::StrCat(prefix, absl::AsciiStrToUpper(value));
  }
}

absl::Status ReadSpeculation(const json& body, v1::GenerateRequest* out) {
  std::optional<json> v = Field(body, "speculation");
  if (!v) return absl::OkStatus();
  if (!v->is_object())
    return Invalid("speculation", "must be an object (tandem.v1.SpeculationParams)");
  ExpandEnumNames(*v);
  auto parsed = google::protobuf::util::JsonStringToMessage(v->dump(), out->mutable_speculation());
  if (!parsed.ok()) {
    return Invalid("speculation", absl::StrCat("not a tandem.v1.SpeculationParams: ",
                                               std::string(parsed.message())));
  }
  return absl::OkStatus();
}

absl::Status ReadSampling(const json& body, v1::GenerateRequest* out) {
  std::optional<double> temperature, top_p;
  if (absl::Status s = ReadNumber(body, "temperature", &temperature); !s.ok()) return s;
  if (absl::Status s = ReadNumber(body, "top_p", &top_p); !s.ok()) return s;
  std::optional<int64_t> top_k, seed;
  if (absl::Status s = ReadInt(body, "top_k", 0, INT32_MAX, &top_k); !s.ok()) return s;
  if (absl::Status s = ReadInt(body, "seed", 0, INT64_MAX, &seed); !s.ok()) return s;
  v1::SamplingParams* sampling = out->mutable_sampling();
  if (temperature) sampling->set_temperature(static_cast<float>(*temperature));
  if (top_p) sampling->set_top_p(static_cast<float>(*top_p));
  if (top_k) sampling->set_top_k(static_cast<int32_t>(*top_k));
  if (seed) sampling->set_seed(static_cast<uint64_t>(*seed));
  bool ignore_eos = false;
  if (absl::Status s = ReadBool(body, "ignore_eos", &ignore_eos); !s.ok()) return s;
  out->set_ignore_eos(ignore_eos);
  return absl::OkStatus();
}

// prompt: a string, an array of one string, token ids, or an array of one token-id array.
absl::Status ReadPrompt(const json& body, v1::GenerateRequest* out) {
  std::optional<json> v = Field(body, "prompt");
  if (!v) return Invalid("prompt", "is required");
  json prompt = *v;
  if (prompt.is_array() && prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) {
    prompt = json(prompt[0]);
  }
  if (prompt.is_string()) {
    out->set_text(prompt.get<std::string>());
    return absl::OkStatus();
  }
  if (!prompt.is_array() || prompt.empty()) {
    return Invalid("prompt", "must be a string, or a non-empty array of token ids (one prompt)");
  }
  for (const json& id : prompt) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return Invalid("prompt", "must be a string, or an array of token ids (one prompt)");
    }
    out->mutable_token_ids()->add_ids(id.get<int32_t>());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MessageContent(const json& message, size_t index,
                                           const std::string& role) {
  const std::string param = absl::StrCat("messages[", index, "].content");
  std::optional<json> content = Field(message, "content");
  if (!content) {
    if (role == "assistant") return std::string();
    return Invalid(param, "is required");
  }
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) return Invalid(param, "must be a string or an array of text parts");
  std::string text;
  for (const json& part : *content) {
    if (!HasType(part, "text") || !part.contains("text") || !part["text"].is_string()) {
      return Invalid(param, "only text parts ({\"type\": \"text\", \"text\": ...}) are supported");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

absl::Status ReadMessages(const json& body, v1::ChatPrompt* out) {
  std::optional<json> v = Field(body, "messages");
  if (!v || !v->is_array() || v->empty()) {
    return Invalid("messages", "must be a non-empty array of messages");
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return Invalid(param, "must be an object with role and content");
    if (!m.contains("role") || !m["role"].is_string()) {
      return Invalid(absl::StrCat(param, ".role"), "must be a string");
    }
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (!IsChatRole(role)) {
      return Invalid(absl::StrCat(param, ".role"),
                     absl::StrCat("unknown role \"", role,
                                  "\" (system, developer, user and assistant are supported)"));
    }
    if (m.contains("tool_calls")) return Invalid(param, "tool calls are not supported");
    absl::StatusOr<std::string> content = MessageContent(m, i, role);
    if (!content.ok()) return content.status();
    v1::ChatMessage* message = out->add_messages();
    message->set_role(role);
    message->set_content(*std::move(content));
  }
  return absl::OkStatus();
}

absl::Status ReadLengthAndLogprobs(const json& body, OpenAiRequest* out) {
  std::optional<int64_t> max_tokens, max_completion_tokens;
  if (absl::Status s = ReadInt(body, "max_tokens", 1, INT32_MAX, &max_tokens); !s.ok()) return s;
  if (absl::Status s = ReadInt(body, "max_completion_tokens", 1, INT32_MAX, &max_completion_tokens);
      !s.ok()) {
    return s;
  }
  const bool chat = out->endpoint == OpenAiEndpoint::kChatCompletions;
  int64_t max_new = chat ? 0 : 16;  // 0: the server's default.
  if (max_tokens) max_new = *max_tokens;
  if (chat && max_completion_tokens) max_new = *max_completion_tokens;
  out->generate.set_max_new_tokens(static_cast<uint32_t>(max_new));
  if (chat) {
    if (absl::Status s = ReadBool(body, "logprobs", &out->logprobs); !s.ok()) return s;
    std::optional<int64_t> top;
    if (absl::Status s = ReadInt(body, "top_logprobs", 0, 20, &top); !s.ok()) return s;
    if (top && *top > 0) {
      return Invalid("top_logprobs", "alternatives are not supported (only 0)");
    }
  } else {
    std::optional<int64_t> logprobs;
    if (absl::Status s = ReadInt(body, "logprobs", 0, 5, &logprobs); !s.ok()) return s;
    if (logprobs && *logprobs > 0) {
      return Invalid(
          "logprobs",
          "alternatives are not supported: 0 returns the chosen tokens' log-probabilities");
    }
    out->logprobs = logprobs.has_value();
  }
  out->generate.set_return_logprobs(out->logprobs);
  out->generate.set_return_token_ids(out->logprobs);
  return absl::OkStatus();
}

absl::Status ReadStreaming(const json& body, OpenAiRequest* out) {
  if (absl::Status s = ReadBool(body, "stream", &out->stream); !s.ok()) return s;
  std::optional<json> options = Field(body, "stream_options");
  if (!options) return absl::OkStatus();
  if (!out->stream) return Invalid("stream_options", "is only allowed when stream is true");
  if (!options->is_object()) return Invalid("stream_options", "must be an object");
  if (absl::Status s = ReadBool(*options, "include_usage", &out->include_usage); !s.ok()) {
    return Invalid("stream_options.include_usage", "must be a boolean");
  }
  return absl::OkStatus();
}

}  // namespace

void ApplyOpenAiTemperatureDefault(const RequestSamplingDefaults& defaults,
                                   v1::GenerateRequest* request) {
  v1::SamplingParams* sampling = request->mutable_sampling();
  if (sampling->has_temperature()) return;
  sampling->set_temperature(TemperatureWhenUnset(defaults, kOpenAiDefaultTemperature));
}

absl::Status WithParam(absl::Status status, absl::string_view param) {
  status.SetPayload(kParamPayload, absl::Cord(param));
  return status;
}

std::string ParamOf(const absl::Status& status) {
  absl::optional<absl::Cord> param = status.GetPayload(kParamPayload);
  return param ? std::string(*param) : std::string();
}

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, absl::string_view body) {
  json parsed;
  try {
    parsed = json::parse(body.begin(), body.end());
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("request body is not valid JSON (byte ", e.byte, ")"));
  } catch (const json::exception& e) {  // E.g. out_of_range: a number beyond double.
    return absl::InvalidArgumentError("request body is not valid JSON (a number out of range)");
  }
  if (!parsed.is_object()) return absl::InvalidArgumentError("request body must be a JSON object");
  OpenAiRequest out;
  out.endpoint = endpoint;
  std::optional<json> model = Field(parsed, "model");
  if (!model || !model->is_string()) return Invalid("model", "is required (a string)");
  out.model = model->get<std::string>();
  const bool chat = endpoint == OpenAiEndpoint::kChatCompletions;
  for (absl::Status s : {RefuseUnsupported(parsed),
                         chat ? ReadMessages(parsed, out.generate.mutable_chat())
                              : ReadPrompt(parsed, &out.generate),
                         ReadLengthAndLogprobs(parsed, &out), ReadStreaming(parsed, &out),
                         ReadStop(parsed, &out.generate), ReadSampling(parsed, &out.generate),
                         ReadSpeculation(parsed, &out.generate)}) {
    if (!s.ok()) return s;
  }
  std::optional<json> user = Field(parsed, "user");
  if (user && !user->is_string()) return Invalid("user", "must be a string");
  return out;
}

}  // namespace tandem::coordinator
