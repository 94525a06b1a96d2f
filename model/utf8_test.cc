#include "model/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem {
namespace internal {
namespace {

TEST(Utf8Test, AcceptsWellFormedText) {
  EXPECT_TRUE(IsWellFormedUtf8(""));
  EXPECT_TRUE(IsWellFormedUtf8("plain ascii\n\t"));
  EXPECT_TRUE(IsWellFormedUtf8(std::string("nul\0inside", 10)));
  EXPECT_TRUE(IsWellFormedUtf8("\xC2\x80 \xDF\xBF"));                  // U+0080, U+07FF
  EXPECT_TRUE(IsWellFormedUtf8("\xE0\xA0\x80 \xEF\xBF\xBD"));          // U+0800, U+FFFD
  EXPECT_TRUE(IsWellFormedUtf8("\xED\x9F\xBF \xEE\x80\x80"));          // U+D7FF, U+E000
  EXPECT_TRUE(IsWellFormedUtf8("\xF0\x90\x80\x80 \xF4\x8F\xBF\xBF"));  // U+10000, U+10FFFF
  EXPECT_TRUE(IsWellFormedUtf8("caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80"));
}

TEST(Utf8Test, RejectsMalformedText) {
  EXPECT_FALSE(IsWellFormedUtf8("\x80"));              // Lone continuation byte.
  EXPECT_FALSE(IsWellFormedUtf8("\xC0\x80"));          // Overlong NUL.
  EXPECT_FALSE(IsWellFormedUtf8("\xC1\xBF"));          // Overlong.
  EXPECT_FALSE(IsWellFormedUtf8("\xE0\x9F\xBF"));      // Overlong 3-byte.
  EXPECT_FALSE(IsWellFormedUtf8("\xF0\x8F\xBF\xBF"));  // Overlong 4-byte.
  EXPECT_FALSE(IsWellFormedUtf8("\xED\xA0\x80"));      // Surrogate U+D800.
  EXPECT_FALSE(IsWellFormedUtf8("\xF4\x90\x80\x80"));  // U+110000.
  EXPECT_FALSE(IsWellFormedUtf8("\xF5\x80\x80\x80"));
  EXPECT_FALSE(IsWellFormedUtf8("\xF8\x88\x80\x80\x80"));
  EXPECT_FALSE(IsWellFormedUtf8("\xFF"));
  EXPECT_FALSE(IsWellFormedUtf8("abc\xE4\xB8"));  // Truncated at the end.
  EXPECT_FALSE(IsWellFormedUtf8("\xE4\xB8x"));    // Interrupted sequence.
  EXPECT_FALSE(IsWellFormedUtf8("\xC3"));
}

TEST(Utf8Test, CharLengthOfTheFirstCharacter) {
  EXPECT_EQ(Utf8CharLength(""), 0u);
  EXPECT_EQ(Utf8CharLength("ab"), 1u);
  EXPECT_EQ(Utf8CharLength("\xC3\xA9x"), 2u);         // U+00E9
  EXPECT_EQ(Utf8CharLength("\xE4\xB8\xAD"), 3u);      // U+4E2D
  EXPECT_EQ(Utf8CharLength("\xF0\x9F\x98\x80"), 4u);  // U+1F600
  EXPECT_EQ(Utf8CharLength("\xE4\xB8"), 0u);          // Truncated.
  EXPECT_EQ(Utf8CharLength("\xC0\x80"), 0u);          // Overlong.
  EXPECT_EQ(Utf8CharLength("\xED\xA0\x80"), 0u);      // Surrogate.
  EXPECT_EQ(Utf8CharLength("\x80"), 0u);              // Continuation byte.
}

}  // namespace
}  // namespace internal
}  // namespace tandem
