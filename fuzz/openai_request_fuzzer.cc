// libFuzzer target: arbitrary bytes as the body of an OpenAI-compatible request (both
// endpoints: the first byte picks one). Besides "no crash, no exception, no undefined
// behaviour": an accepted body has a prompt of its endpoint's kind (chat messages with
// roles a chat may have, or a text / token-id prompt); a refused one is INVALID_ARGUMENT
// with a message, and its error body is OpenAI's JSON shape.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "coordinator/chat_prompt.h"
#include "coordinator/openai_request.h"
#include "coordinator/openai_response.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using tandem::coordinator::OpenAiEndpoint;
  const OpenAiEndpoint endpoint =
      data[0] % 2 ? OpenAiEndpoint::kChatCompletions : OpenAiEndpoint::kCompletions;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto parsed = tandem::coordinator::ParseOpenAiRequest(endpoint, body);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!parsed.status().message().empty());
    const nlohmann::json error =
        nlohmann::json::parse(tandem::coordinator::ErrorBody(parsed.status()), nullptr, false);
    FUZZ_CHECK(error.is_object() && error.contains("error") && error["error"].size() == 4);
    FUZZ_CHECK(tandem::coordinator::HttpStatusOf(parsed.status()) == 400);
    return 0;
  }
  const tandem::v1::GenerateRequest& r = parsed->generate;
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    FUZZ_CHECK(r.has_chat() && r.chat().messages_size() > 0);
    for (const auto& m : r.chat().messages()) FUZZ_CHECK(tandem::coordinator::IsChatRole(m.role()));
  } else {
    FUZZ_CHECK(r.has_text() || r.has_token_ids());
    if (r.has_token_ids()) FUZZ_CHECK(r.token_ids().ids_size() > 0);
  }
  FUZZ_CHECK(parsed->include_usage ? parsed->stream : true);
  FUZZ_CHECK(r.return_logprobs() == parsed->logprobs);
  return 0;
}
