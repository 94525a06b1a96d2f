#include "client/prompts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tandem::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParsePromptsTest, JsonLinesStringsAndPlainText) {
  auto p = ParsePrompts(
      "{\"id\": \"a\", \"prompt\": \"def f():\\n    return\"}\n"
      "\n"
      "\"a json string\"\n"
      "plain text line   \n"
      "{\"text\": \"other key\"}\n");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(*p,
              ElementsAre("def f():\n    return", "a json string", "plain text line", "other key"));
}

TEST(ParsePromptsTest, ErrorsNameTheLine) {
  auto bad = ParsePrompts("ok\n{\"prompt\": 3}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("line 2"));
  EXPECT_FALSE(ParsePrompts("{broken\n").ok());
  EXPECT_FALSE(ParsePrompts("\n\n").ok());
  EXPECT_FALSE(ParsePrompts("{\"prompt\": \"\"}").ok());
  EXPECT_THAT(std::string(LoadPrompts("/nonexistent.jsonl").status().message()),
              HasSubstr("/nonexistent.jsonl"));
}

}  // namespace
}  // namespace tandem::client
