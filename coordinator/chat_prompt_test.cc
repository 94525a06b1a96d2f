// Chat prompts: role checks, the missing-template and template-error statuses, and the
// leading BOS text dropped from a rendering.
#include "coordinator/chat_prompt.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::coordinator {
namespace {

v1::ChatPrompt Chat(std::initializer_list<std::pair<const char*, const char*>> messages) {
  v1::ChatPrompt chat;
  for (const auto& [role, content] : messages) {
    v1::ChatMessage* m = chat.add_messages();
    m->set_role(role);
    m->set_content(content);
  }
  return chat;
}

// "<s>" then "role: content" lines, like a simple template.
absl::StatusOr<std::string> Render(const v1::ChatPrompt& chat) {
  std::string out = "<s>";
  for (const v1::ChatMessage& m : chat.messages()) {
    if (m.content() == "raise") return absl::InvalidArgumentError("raise_exception: no");
    out += m.role() + ": " + m.content() + "\n";
  }
  return out + "assistant:";
}

TEST(ChatPromptTest, RendersAndDropsTheLeadingBos) {
  absl::StatusOr<std::string> text =
      RenderChatPrompt(Chat({{"system", "Be brief."}, {"user", "Hi"}}), Render, "<s>");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "system: Be brief.\nuser: Hi\nassistant:");
  text = RenderChatPrompt(Chat({{"user", "Hi"}}), Render, "");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<s>user: Hi\nassistant:");  // No BOS text: nothing dropped.
}

TEST(ChatPromptTest, Refusals) {
  absl::StatusOr<std::string> r = RenderChatPrompt(Chat({}), Render, "<s>");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = RenderChatPrompt(Chat({{"user", "a"}, {"tool", "b"}}), Render, "<s>");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("messages[1].role: unknown role \"tool\""),
            std::string::npos);
  r = RenderChatPrompt(Chat({{"user", "a"}}), nullptr, "<s>");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("model has no chat template"), std::string::npos);
  r = RenderChatPrompt(Chat({{"user", "raise"}}), Render, "<s>");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "chat template: raise_exception: no");
  EXPECT_TRUE(IsChatRole("assistant"));
  EXPECT_FALSE(IsChatRole("developer"));
}

// A model directory whose tokenizer_config.json holds `config` (JSON).
std::string ModelDir(const std::string& name, const std::string& config) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::system(absl::StrCat("mkdir -p ", dir).c_str());
  std::ofstream(dir + "/tokenizer_config.json") << config;
  return dir;
}

// A template that prefixes BOS, tags each message with its role and refuses system ones.
constexpr char kTemplatedConfig[] =
    R"({"bos_token": "<s>", "eos_token": "</s>", "chat_template": ")"
    R"({{ bos_token }}{% for m in messages %}{% if m.role == 'system' %})"
    R"({{ raise_exception('no system role') }}{% endif %}[{{ m.role }}] {{ m.content }}\n)"
    R"({% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"})";

TEST(ChatPromptTest, RendersWithTheModelsTemplate) {
  const std::string dir = ModelDir("templated", kTemplatedConfig);
  absl::StatusOr<ChatRenderer> renderer = ModelChatRenderer(dir);
  ASSERT_TRUE(renderer.ok()) << renderer.status();
  ASSERT_TRUE(*renderer);
  absl::StatusOr<std::string> text = RenderChatPrompt(
      Chat({{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}}), *renderer, "<s>");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "[user] Hi\n[assistant] Hello\n[user] Bye\n[assistant] ");
  text = RenderChatPrompt(Chat({{"system", "x"}}), *renderer, "<s>");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find("chat template: "), std::string::npos);
  EXPECT_NE(text.status().message().find("no system role"), std::string::npos);
}

TEST(ChatPromptTest, AModelWithoutATemplateHasNoRenderer) {
  absl::StatusOr<ChatRenderer> renderer = ModelChatRenderer("models/target");
  ASSERT_TRUE(renderer.ok()) << renderer.status();
  EXPECT_FALSE(*renderer);
  renderer = ModelChatRenderer(ModelDir("broken", R"({"chat_template": "{% for %}"})"));
  EXPECT_EQ(renderer.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::coordinator
