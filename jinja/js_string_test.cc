#include "jinja/js_string.h"

#include "gtest/gtest.h"

namespace tandem::jinja {
namespace {

TEST(JsStringTest, TrimRemovesJavaScriptWhitespace) {
  // NBSP, ideographic space, BOM and line separator are whitespace in JavaScript.
  EXPECT_EQ(JsTrim("\xC2\xA0 \t\n hi there \xE3\x80\x80\xEF\xBB\xBF\xE2\x80\xA8"), "hi there");
  EXPECT_EQ(JsTrimStart("  a  "), "a  ");
  EXPECT_EQ(JsTrimEnd("  a  "), "  a");
  // Not whitespace: zero-width space U+200B, and a malformed byte.
  EXPECT_EQ(JsTrim("\xE2\x80\x8B"
                   "a"),
            "\xE2\x80\x8B"
            "a");
  EXPECT_EQ(JsTrim(" \xFF "), "\xFF");
  EXPECT_EQ(JsTrim(""), "");
}

TEST(JsStringTest, SpaceDetection) {
  EXPECT_EQ(JsSpaceAt("a b", 1), 1u);
  EXPECT_EQ(JsSpaceAt("a b", 0), 0u);
  EXPECT_EQ(JsSpaceAt("x\xE3\x80\x80", 1), 3u);
  EXPECT_EQ(JsSpaceBefore("x\xE3\x80\x80", 4), 3u);
  EXPECT_EQ(JsSpaceBefore("x", 1), 0u);
}

TEST(JsStringTest, CharactersAndLength) {
  const std::vector<std::string> chars = SplitCharacters("aé😀");
  ASSERT_EQ(chars.size(), 3u);
  EXPECT_EQ(chars[1], "é");
  EXPECT_EQ(chars[2], "😀");
  EXPECT_EQ(JsLength("aé😀"), 4u);  // the emoji is a surrogate pair in UTF-16
}

TEST(JsStringTest, AsciiCase) {
  EXPECT_EQ(AsciiUpper("abc é"), "ABC é");
  EXPECT_EQ(AsciiLower("ABC"), "abc");
}

}  // namespace
}  // namespace tandem::jinja
