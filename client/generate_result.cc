#include "client/generate_result.h"

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

namespace tandem::client {

void AddStreamMessage(const v1::GenerateStreamResponse& message, GenerateResult* result) {
  result->request_id = message.request_id();
  result->text += message.text_delta();
  result->token_ids.insert(result->token_ids.end(), message.token_ids().begin(),
                           message.token_ids().end());
  result->logprobs.insert(result->logprobs.end(), message.logprobs().begin(),
                          message.logprobs().end());
  if (message.has_stats()) {
    result->stats = message.stats();
    result->finish_reason = message.finish_reason();
    result->has_stats = true;
  }
}

std::string GenerateResultJson(const GenerateResult& result) {
  using json = nlohmann::json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string stats;
  (void)google::protobuf::util::MessageToJsonString(result.stats, &stats, options);
  const char* finish = result.finish_reason == v1::FINISH_REASON_LENGTH ? "length"
                       : result.finish_reason == v1::FINISH_REASON_EOS  ? "eos"
                       : result.finish_reason == v1::FINISH_REASON_STOP ? "stop"
                                                                        : nullptr;
  json out = {{"request_id", result.request_id},
              {"text", result.text},
              {"token_ids", result.token_ids},
              {"logprobs", result.logprobs},
              {"finish_reason", finish ? json(finish) : json(nullptr)},
              {"stats", json::parse(stats, nullptr, false)},
              {"client_seconds", result.client_seconds}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tandem::client
