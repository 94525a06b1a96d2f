#include "coordinator/chat_prompt.h"

#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/chat_template.h"

namespace tandem::coordinator {

absl::StatusOr<ChatRenderer> ModelChatRenderer(const std::string& model_dir) {
  absl::StatusOr<ChatTemplate> loaded = ChatTemplate::FromModelDir(model_dir);
  if (absl::IsNotFound(loaded.status())) return ChatRenderer();
  if (!loaded.ok()) return loaded.status();
  auto chat_template = std::make_shared<const ChatTemplate>(*std::move(loaded));
  return ChatRenderer([chat_template](const v1::ChatPrompt& chat) {
    std::vector<ChatMessage> messages;
    for (const v1::ChatMessage& m : chat.messages()) messages.push_back({m.role(), m.content()});
    return chat_template->Render(messages, /*add_generation_prompt=*/true);
  });
}

bool IsChatRole(absl::string_view role) {
  return role == "system" || role == "user" || role == "assistant";
}

absl::StatusOr<std::string> RenderChatPrompt(const v1::ChatPrompt& chat,
                                             const ChatRenderer& renderer,
                                             absl::string_view bos_text) {
  if (chat.messages().empty()) {
    return absl::InvalidArgumentError("chat.messages: at least one message is required");
  }
  for (int i = 0; i < chat.messages_size(); ++i) {
    const std::string& role = chat.messages(i).role();
    if (!IsChatRole(role)) {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "].role: unknown role \"", role,
                       "\" (system, user and assistant are supported)"));
    }
  }
  if (!renderer) {
    return absl::FailedPreconditionError(
        "model has no chat template: send a text prompt (/v1/completions) instead");
  }
  absl::StatusOr<std::string> text = renderer(chat);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template: ", std::string(text.status().message())));
  }
  if (!bos_text.empty() && absl::StartsWith(*text, bos_text)) text->erase(0, bos_text.size());
  return text;
}

}  // namespace tandem::coordinator
