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

TEST(Utf8Test, PartialLengthIsTheMaximalSubpart) {
  EXPECT_EQ(Utf8PartialLength(""), 0u);
  EXPECT_EQ(Utf8PartialLength("a"), 0u);
  EXPECT_EQ(Utf8PartialLength("\xE2\x82\xAC"), 0u);  // whole "€"
  EXPECT_EQ(Utf8PartialLength("\xE2\x82"), 2u);
  EXPECT_EQ(Utf8PartialLength("\xE2\x82x"), 2u);
  EXPECT_EQ(Utf8PartialLength("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(Utf8PartialLength("\xE0\x80"), 1u);  // overlong: only the lead matches
  EXPECT_EQ(Utf8PartialLength("\x80"), 0u);
  EXPECT_EQ(Utf8PartialLength("\xFF"), 0u);
}

TEST(Utf8Test, LossyDecodingReplacesEachMaximalSubpart) {
  auto lossy = [](absl::string_view bytes) {
    std::string out;
    AppendUtf8Lossy(bytes, &out);
    return out;
  };
  EXPECT_EQ(lossy("ok \xE2\x82\xAC"), "ok \xE2\x82\xAC");
  EXPECT_EQ(lossy("\xE2\x82x"), "\xEF\xBF\xBDx");            // one U+FFFD for 2 bytes
  EXPECT_EQ(lossy("\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // one per stray byte
  EXPECT_EQ(lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");          // truncated at the end
  EXPECT_EQ(lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
}

TEST(Utf8Test, EndsWithPartialCharacter) {
  EXPECT_FALSE(EndsWithPartialCharacter(""));
  EXPECT_FALSE(EndsWithPartialCharacter("abc"));
  EXPECT_FALSE(EndsWithPartialCharacter("a\xE2\x82\xAC"));
  EXPECT_TRUE(EndsWithPartialCharacter("a\xE2"));
  EXPECT_TRUE(EndsWithPartialCharacter("a\xE2\x82"));
  EXPECT_TRUE(EndsWithPartialCharacter("\xF0\x9F\x98"));
  EXPECT_FALSE(EndsWithPartialCharacter("\xE2\x82x"));  // already malformed
  EXPECT_FALSE(EndsWithPartialCharacter("\x80\x80"));   // stray continuation bytes
  EXPECT_FALSE(EndsWithPartialCharacter("\xE0\x80"));   // cannot be completed
}

}  // namespace
}  // namespace internal
}  // namespace tandem
