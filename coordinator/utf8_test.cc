#include "coordinator/utf8.h"

#include <cstdint>
#include <random>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

// Reference encoder written from the UTF-8 definition.
std::string Encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Every valid character encoding, and every proper prefix (length >= 1) of a
// multi-byte one.
struct Reference {
  absl::flat_hash_set<std::string> characters;
  absl::flat_hash_set<std::string> proper_prefixes;

  Reference() {
    for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string e = Encode(cp);
      for (size_t n = 1; n < e.size(); ++n) proper_prefixes.insert(e.substr(0, n));
      characters.insert(std::move(e));
    }
  }

  // Offset of the first invalid byte, by splitting into known characters (UTF-8 is
  // prefix-free, so at most one length matches at each point).
  size_t FirstInvalid(const std::string& s) const {
    size_t i = 0;
    while (i < s.size()) {
      size_t step = 0;
      for (size_t n = 1; n <= 4 && i + n <= s.size(); ++n) {
        if (characters.contains(s.substr(i, n))) {
          step = n;
          break;
        }
      }
      if (step == 0) return i;
      i += step;
    }
    return std::string::npos;
  }

  size_t IncompleteSuffix(const std::string& s) const {
    for (size_t n = 3; n >= 1; --n) {
      if (s.size() >= n && proper_prefixes.contains(s.substr(s.size() - n))) return n;
    }
    return 0;
  }
};

const Reference& Ref() {
  static const Reference* ref = new Reference();
  return *ref;
}

TEST(Utf8Test, KnownExamples) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_EQ(FindInvalidUtf8("ab\xC0\xAF"), 2u);                            // Overlong '/'.
  EXPECT_EQ(FindInvalidUtf8("\xED\xA0\x80"), 0u);                          // Surrogate U+D800.
  EXPECT_EQ(FindInvalidUtf8("x\xF4\x90\x80\x80"), 1u);                     // U+110000.
  EXPECT_EQ(FindInvalidUtf8("abc\xE2\x82"), 3u);                           // Cut short.
  EXPECT_EQ(FindInvalidUtf8("\x80"), 0u);                                  // Lone continuation.
  EXPECT_EQ(FindInvalidUtf8(std::string("a\0b", 3)), std::string::npos);

  EXPECT_EQ(IncompleteUtf8SuffixLength("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("ab\xE2"), 1u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("ab\xE2\x82"), 2u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("ab\xE2\x82\xAC"), 0u);  // Complete.
  EXPECT_EQ(IncompleteUtf8SuffixLength("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("\xED\xA0"), 0u);  // Would be a surrogate.
  EXPECT_EQ(IncompleteUtf8SuffixLength("a\x80"), 0u);
}

TEST(Utf8Test, AllOneAndTwoByteStringsMatchReference) {
  for (int a = 0; a < 256; ++a) {
    std::string s1(1, static_cast<char>(a));
    ASSERT_EQ(FindInvalidUtf8(s1), Ref().FirstInvalid(s1)) << a;
    ASSERT_EQ(IncompleteUtf8SuffixLength(s1), Ref().IncompleteSuffix(s1)) << a;
    for (int b = 0; b < 256; ++b) {
      std::string s2 = s1 + static_cast<char>(b);
      ASSERT_EQ(FindInvalidUtf8(s2), Ref().FirstInvalid(s2)) << a << " " << b;
      ASSERT_EQ(IncompleteUtf8SuffixLength(s2), Ref().IncompleteSuffix(s2)) << a << " " << b;
    }
  }
}

TEST(Utf8Test, RandomStringsMatchReference) {
  std::mt19937 rng(1234);
  // Bytes drawn mostly from the interesting region (leads and continuations).
  const std::string alphabet =
      "a\x7F\x80\x8F\x90\x9F\xA0\xBF\xC0\xC1\xC2\xDF\xE0\xE1\xEC\xED\xEE\xEF\xF0\xF1\xF3"
      "\xF4\xF5\xFF";
  for (int iter = 0; iter < 300000; ++iter) {
    const size_t len = rng() % 7 + 1;
    std::string s;
    for (size_t i = 0; i < len; ++i) {
      s += (rng() % 4 == 0) ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()];
    }
    ASSERT_EQ(FindInvalidUtf8(s), Ref().FirstInvalid(s)) << iter;
    ASSERT_EQ(IncompleteUtf8SuffixLength(s), Ref().IncompleteSuffix(s)) << iter;
  }
}

TEST(Utf8Test, EveryEncodedCharacterIsValidAndEveryPrefixIsIncomplete) {
  for (uint32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x10000 ? 1 : 17)) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string e = Encode(cp);
    ASSERT_TRUE(IsValidUtf8("x" + e)) << cp;
    for (size_t n = 1; n < e.size(); ++n) {
      ASSERT_EQ(IncompleteUtf8SuffixLength("x" + e.substr(0, n)), n) << cp;
    }
  }
}

}  // namespace
}  // namespace tandem::coordinator
