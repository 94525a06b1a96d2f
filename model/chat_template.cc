#include "model/chat_template.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/utf8.h"

namespace tandem {
namespace {

using nlohmann::ordered_json;

// The file's bytes; NOT_FOUND when it cannot be opened.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// A special token: a string, an AddedToken object {"content": ...}, or absent ("").
absl::StatusOr<std::string> SpecialToken(const ordered_json& config, const char* field,
                                         const std::string& source) {
  auto it = config.find(field);
  if (it == config.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": field \"", field, "\" is neither a string nor an object with \"content\""));
}

// The template text of `chat_template`: a string, or the "default" entry of a list of
// {name, template}; "" when absent.
absl::StatusOr<std::string> ConfigTemplate(const ordered_json& config, const std::string& source) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const ordered_json& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
    return absl::NotFoundError(
        absl::StrCat(source, ": \"chat_template\" has no entry named \"default\""));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": \"chat_template\" is neither a string nor a list"));
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromModelDir(const std::string& model_dir) {
  const std::string config_path = model_dir + "/tokenizer_config.json";
  ordered_json config = ordered_json::object();
  if (absl::StatusOr<std::string> text = ReadFile(config_path); text.ok()) {
    config = ordered_json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(config_path, ": not a JSON object"));
    }
  }
  absl::StatusOr<std::string> template_text = ConfigTemplate(config, config_path);
  if (!template_text.ok()) return template_text.status();
  if (absl::StatusOr<std::string> file = ReadFile(model_dir + "/chat_template.jinja"); file.ok()) {
    template_text = *std::move(file);
  }
  if (template_text->empty()) {
    return absl::NotFoundError(absl::StrCat(model_dir,
                                            " has no chat template (no chat_template in ",
                                            "tokenizer_config.json, no chat_template.jinja)"));
  }
  absl::StatusOr<std::string> bos = SpecialToken(config, "bos_token", config_path);
  if (!bos.ok()) return bos.status();
  absl::StatusOr<std::string> eos = SpecialToken(config, "eos_token", config_path);
  if (!eos.ok()) return eos.status();
  absl::StatusOr<ChatTemplate> parsed =
      FromString(*std::move(template_text), *std::move(bos), *std::move(eos));
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_dir, ": chat template: ", parsed.status().message()));
  }
  return parsed;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromString(std::string template_text,
                                                      std::string bos_token,
                                                      std::string eos_token) {
  absl::StatusOr<jinja::Template> parsed = jinja::Template::Parse(template_text);
  if (!parsed.ok()) return parsed.status();
  return ChatTemplate(*std::move(parsed), std::move(bos_token), std::move(eos_token));
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 bool add_generation_prompt) const {
  return Render(messages, add_generation_prompt, ordered_json::object());
}

absl::StatusOr<std::string> ChatTemplate::Render(
    const std::vector<ChatMessage>& messages, bool add_generation_prompt,
    const nlohmann::ordered_json& extra_variables) const {
  if (!extra_variables.is_object()) {
    return absl::InvalidArgumentError("chat template variables must be a JSON object");
  }
  jinja::ValueList list;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    bool known_role = false;
    for (const char* role : kChatRoles) known_role = known_role || message.role == role;
    if (!known_role) {
      return absl::InvalidArgumentError(
          absl::StrCat("message ", i, ": unknown role \"", message.role,
                       "\" (expected system, user, assistant or tool)"));
    }
    if (!internal::IsWellFormedUtf8(message.content)) {
      return absl::InvalidArgumentError(absl::StrCat("message ", i, ": content is not UTF-8"));
    }
    jinja::ValueDict entry;
    entry.Set("role", jinja::Value::String(message.role));
    entry.Set("content", jinja::Value::String(message.content));
    list.push_back(jinja::Value::Dict(std::move(entry)));
  }
  jinja::ValueDict variables;
  for (const auto& [name, value] : extra_variables.items()) {
    if (name == "messages" || name == "add_generation_prompt" || name == "bos_token" ||
        name == "eos_token") {
      return absl::InvalidArgumentError(
          absl::StrCat("chat template variable \"", name, "\" cannot be replaced"));
    }
    variables.Set(name, jinja::Value::FromJson(value));
  }
  variables.Set("messages", jinja::Value::List(std::move(list)));
  variables.Set("add_generation_prompt", jinja::Value::Bool(add_generation_prompt));
  variables.Set("bos_token", jinja::Value::String(bos_token_));
  variables.Set("eos_token", jinja::Value::String(eos_token_));
  return template_.Render(variables, options_);
}

}  // namespace tandem
