// Chat prompts (tandem.v1.ChatPrompt): the checks every API applies to a conversation and
// its rendering into the prompt text by the model's chat template. Shared by the gRPC API
// and the OpenAI-compatible HTTP API through RequestSubmitter.
#ifndef TANDEM_COORDINATOR_CHAT_PROMPT_H_
#define TANDEM_COORDINATOR_CHAT_PROMPT_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::coordinator {

// Renders a checked conversation into prompt text with the model's chat template (with
// the generation prompt for the assistant's reply). Its error is the template's.
using ChatRenderer = std::function<absl::StatusOr<std::string>(const v1::ChatPrompt&)>;

// The renderer of the chat template of the model in `model_dir` (tokenizer_config.json's
// chat_template or chat_template.jinja, model/chat_template.h), rendering with the
// generation prompt; a null renderer when the model has none; INVALID_ARGUMENT when its
// template or tokenizer_config.json does not parse.
absl::StatusOr<ChatRenderer> ModelChatRenderer(const std::string& model_dir);

// Whether `role` is one a chat message may have: "system", "user" or "assistant".
bool IsChatRole(absl::string_view role);

// The prompt text of `chat`: INVALID_ARGUMENT naming messages[i] for no messages or an
// unknown role; FAILED_PRECONDITION "model has no chat template" when `renderer` is null;
// INVALID_ARGUMENT "chat template: <its error>" when rendering fails. A leading
// `bos_text` (e.g. "<s>") is dropped from the rendering: the server prepends BOS itself.
absl::StatusOr<std::string> RenderChatPrompt(const v1::ChatPrompt& chat,
                                             const ChatRenderer& renderer,
                                             absl::string_view bos_text);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CHAT_PROMPT_H_
