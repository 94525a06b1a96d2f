// A model's chat template: renders a conversation (`messages`) to the prompt text the
// model was trained on, with the Jinja-subset engine of //jinja (byte-identical to
// @huggingface/jinja on the Llama-3, Qwen3, Mistral and Gemma templates).
#ifndef TANDEM_MODEL_CHAT_TEMPLATE_H_
#define TANDEM_MODEL_CHAT_TEMPLATE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jinja/template.h"

namespace tandem {

// One turn of a conversation. `role` is one of kChatRoles; `content` is UTF-8 text.
struct ChatMessage {
  std::string role;
  std::string content;
};

// The roles Render accepts (whether a template accepts each is the template's business:
// a template may reject a role or an order with raise_exception).
inline constexpr const char* kChatRoles[] = {"system", "user", "assistant", "tool"};

// Copies share the parsed template. Render is const and may run on several threads at
// once (set_clock may not run concurrently with it).
class ChatTemplate {
 public:
  // Reads `chat_template` (a string, or a list of {name, template} where "default" is
  // used) and the bos_token / eos_token strings (a string or an AddedToken object
  // {"content": ...}; "" when absent) from <model_dir>/tokenizer_config.json; the text of
  // <model_dir>/chat_template.jinja, when present, replaces `chat_template`.
  // NOT_FOUND when the directory has no chat template; INVALID_ARGUMENT when
  // tokenizer_config.json or the template does not parse.
  static absl::StatusOr<ChatTemplate> FromModelDir(const std::string& model_dir);
  // From template text (for tests and for a template given on the command line).
  // INVALID_ARGUMENT when it does not parse.
  static absl::StatusOr<ChatTemplate> FromString(std::string template_text, std::string bos_token,
                                                 std::string eos_token);

  // The prompt text for `messages` (template variables: messages as a list of
  // {"role", "content"} dicts, add_generation_prompt, bos_token, eos_token).
  // INVALID_ARGUMENT for a role outside kChatRoles or content that is not UTF-8 (naming
  // the message), with the template's own message when it calls raise_exception, and
  // "template render error: ..." when rendering fails (unknown filter, type error).
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt) const;
  // As above, with further template variables from the JSON object `extra_variables`
  // (e.g. {"tools": [...], "enable_thinking": false}). INVALID_ARGUMENT when it is not an
  // object or names one of the variables above.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt,
                                     const nlohmann::ordered_json& extra_variables) const;

  // The time source of strftime_now (default: the system clock; tests fix it).
  void set_clock(jinja::Clock clock) { options_.clock = std::move(clock); }

  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  ChatTemplate(jinja::Template parsed, std::string bos_token, std::string eos_token)
      : template_(std::move(parsed)),
        bos_token_(std::move(bos_token)),
        eos_token_(std::move(eos_token)) {}

  jinja::Template template_;
  std::string bos_token_;
  std::string eos_token_;
  jinja::RenderOptions options_;
};

}  // namespace tandem

#endif  // TANDEM_MODEL_CHAT_TEMPLATE_H_
