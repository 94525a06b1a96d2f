#include "model/chat_template.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

// A fresh directory under the test's temporary directory.
std::string MakeDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  mkdir(dir.c_str(), 0755);
  return dir;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(ChatTemplateTest, RendersMessagesAndSpecialTokens) {
  auto chat = ChatTemplate::FromString(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m['content'] | trim }}"
      "{% if not loop.last %}|{% endif %}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}",
      "<s>", "</s>");
  ASSERT_TRUE(chat.ok()) << chat.status();
  const std::vector<ChatMessage> messages = {{"system", " Be kind. "}, {"user", "Hi"}};
  EXPECT_EQ(*chat->Render(messages, false), "<s><system>Be kind.|<user>Hi</s>");
  EXPECT_EQ(*chat->Render(messages, true), "<s><system>Be kind.|<user>Hi<assistant></s>");
  EXPECT_EQ(*chat->Render({}, true), "<s><assistant></s>");
}

TEST(ChatTemplateTest, RaiseExceptionGivesTheTemplatesMessage) {
  auto chat = ChatTemplate::FromString(
      "{% for m in messages %}{% if m.role == 'system' %}"
      "{{ raise_exception('System messages are not supported') }}{% endif %}{% endfor %}ok",
      "", "");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(*chat->Render({{"user", "x"}}, false), "ok");
  const auto rejected = chat->Render({{"system", "x"}}, false);
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rejected.status().message(), "System messages are not supported");
}

TEST(ChatTemplateTest, RejectsUnknownRolesAndMalformedContent) {
  auto chat = ChatTemplate::FromString("{{ messages | length }}", "", "");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(*chat->Render({{"tool", "{}"}, {"assistant", "a"}}, false), "2");
  const auto unknown = chat->Render({{"user", "a"}, {"narrator", "b"}}, false);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("message 1: unknown role \"narrator\""),
            std::string::npos)
      << unknown.status();
  const auto malformed = chat->Render({{"user", std::string("bad \xff byte")}}, false);
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(malformed.status().message().find("not UTF-8"), std::string::npos);
}

TEST(ChatTemplateTest, ExtraVariables) {
  auto chat = ChatTemplate::FromString(
      "{% for t in tools %}{{ t | tojson }};{% endfor %}"
      "{% if enable_thinking is defined and enable_thinking is false %}no-think{% endif %}",
      "", "");
  ASSERT_TRUE(chat.ok());
  const auto extra = nlohmann::ordered_json::parse(
      R"({"tools": [{"name": "f", "parameters": {"z": 1, "a": [true, null]}}],
          "enable_thinking": false})");
  EXPECT_EQ(*chat->Render({}, false, extra),
            R"({"name": "f", "parameters": {"z": 1, "a": [true, null]}};no-think)");
  // Without them, `tools` is undefined and a loop over it fails (as in the reference).
  EXPECT_EQ(chat->Render({}, false).status().message(),
            "template render error: Expected iterable or object type in for loop: got "
            "UndefinedValue");
  EXPECT_EQ(chat->Render({}, false, nlohmann::ordered_json::array()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chat->Render({}, false, nlohmann::ordered_json::parse(R"({"messages": []})"))
                .status()
                .message(),
            "chat template variable \"messages\" cannot be replaced");
}

TEST(ChatTemplateTest, RenderErrorsAreInvalidArgument) {
  auto chat = ChatTemplate::FromString("{{ messages | no_such_filter }}", "", "");
  ASSERT_TRUE(chat.ok());
  const auto rendered = chat->Render({{"user", "a"}}, false);
  EXPECT_EQ(rendered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rendered.status().message(), "template render error: Unknown filter: no_such_filter");
  EXPECT_EQ(ChatTemplate::FromString("{% macro m() %}{% endmacro %}", "", "").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, StrftimeNowUsesTheClock) {
  auto chat = ChatTemplate::FromString("{{ strftime_now('%d %b %Y') }}", "", "");
  ASSERT_TRUE(chat.ok());
  setenv("TZ", "UTC", 1);
  chat->set_clock([] { return std::time_t{1722470400}; });  // 2024-08-01 00:00 UTC
  EXPECT_EQ(*chat->Render({}, false), "01 Aug 2024");
}

TEST(ChatTemplateTest, FromModelDirReadsTheCommittedMistralTemplate) {
  auto chat = ChatTemplate::FromModelDir("model/testdata/chat_templates/mistral-7b-instruct-v0.1");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->bos_token(), "<s>");
  EXPECT_EQ(chat->eos_token(), "</s>");
  EXPECT_EQ(*chat->Render({{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}}, true),
            "<s>[INST] Hi [/INST]Hello</s> [INST] Bye [/INST]");
  EXPECT_EQ(chat->Render({{"system", "s"}, {"user", "Hi"}}, true).status().message(),
            "Conversation roles must alternate user/assistant/user/assistant/...");
}

TEST(ChatTemplateTest, FromModelDirReadsTemplateListsAndAddedTokens) {
  const std::string dir = MakeDir("list_form");
  WriteFile(dir + "/tokenizer_config.json", R"({
    "bos_token": {"content": "<bos>", "lstrip": false},
    "eos_token": "<eos>",
    "chat_template": [{"name": "tool_use", "template": "tools"},
                      {"name": "default", "template": "{{ bos_token }}default{{ eos_token }}"}]
  })");
  auto chat = ChatTemplate::FromModelDir(dir);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(*chat->Render({}, false), "<bos>default<eos>");

  // chat_template.jinja replaces the config's template.
  WriteFile(dir + "/chat_template.jinja", "from the file{{ eos_token }}\n");
  chat = ChatTemplate::FromModelDir(dir);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(*chat->Render({}, false), "from the file<eos>");
}

TEST(ChatTemplateTest, FromModelDirErrors) {
  EXPECT_EQ(ChatTemplate::FromModelDir(::testing::TempDir() + "/no_such_dir").status().code(),
            absl::StatusCode::kNotFound);
  const std::string no_template = MakeDir("no_template");
  WriteFile(no_template + "/tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_EQ(ChatTemplate::FromModelDir(no_template).status().code(), absl::StatusCode::kNotFound);

  const std::string bad_json = MakeDir("bad_json");
  WriteFile(bad_json + "/tokenizer_config.json", R"({"chat_template": )");
  EXPECT_EQ(ChatTemplate::FromModelDir(bad_json).status().code(),
            absl::StatusCode::kInvalidArgument);

  const std::string bad_template = MakeDir("bad_template");
  WriteFile(bad_template + "/tokenizer_config.json", R"({"chat_template": "{% if x %}open"})");
  const auto status = ChatTemplate::FromModelDir(bad_template).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("missing {% endif %}"), std::string::npos) << status;

  const std::string bad_token = MakeDir("bad_token");
  WriteFile(bad_token + "/tokenizer_config.json", R"({"chat_template": "x", "bos_token": 1})");
  EXPECT_EQ(ChatTemplate::FromModelDir(bad_token).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem
