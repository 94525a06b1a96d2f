#include "model/utf8.h"

#include <algorithm>

namespace tandem {
namespace internal {
namespace {

constexpr absl::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Bytes of `text` (non-empty) that agree with a well-formed character's first bytes,
// and that character's length; {0, 0} when the lead byte cannot start one.
struct Prefix {
  size_t matched;
  size_t length;
};
Prefix MatchCharacterPrefix(absl::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char lead = bytes[0];
  if (lead < 0x80) return {1, 1};
  // Valid second-byte ranges exclude overlong forms, surrogates and > U+10FFFF.
  unsigned char low = 0x80, high = 0xBF;
  size_t length;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return {0, 0};
  }
  size_t matched = 1;
  while (matched < length && matched < text.size()) {
    const unsigned char byte = bytes[matched];
    const bool in_range = matched == 1 ? byte >= low && byte <= high : (byte & 0xC0) == 0x80;
    if (!in_range) break;
    ++matched;
  }
  return {matched, length};
}

}  // namespace

size_t Utf8CharLength(absl::string_view text) {
  if (text.empty()) return 0;
  const Prefix prefix = MatchCharacterPrefix(text);
  return prefix.matched == prefix.length ? prefix.length : 0;
}

size_t Utf8PartialLength(absl::string_view text) {
  if (text.empty()) return 0;
  const Prefix prefix = MatchCharacterPrefix(text);
  return prefix.matched < prefix.length ? prefix.matched : 0;
}

void AppendUtf8Lossy(absl::string_view bytes, std::string* out) {
  while (!bytes.empty()) {
    const size_t length = Utf8CharLength(bytes);
    if (length > 0) {
      out->append(bytes.data(), length);
      bytes.remove_prefix(length);
    } else {
      out->append(kReplacementCharacter.data(), kReplacementCharacter.size());
      bytes.remove_prefix(std::max<size_t>(1, Utf8PartialLength(bytes)));
    }
  }
}

bool EndsWithPartialCharacter(absl::string_view bytes) {
  // A character is at most 4 bytes: find the last byte, among the final 4, that is not
  // a continuation byte; a partial character must start there and run to the end.
  for (size_t back = 1; back <= 4 && back <= bytes.size(); ++back) {
    const unsigned char byte = static_cast<unsigned char>(bytes[bytes.size() - back]);
    if ((byte & 0xC0) == 0x80) continue;
    return Utf8PartialLength(bytes.substr(bytes.size() - back)) == back;
  }
  return false;
}

bool IsWellFormedUtf8(absl::string_view text) {
  while (!text.empty()) {
    const size_t length = Utf8CharLength(text);
    if (length == 0) return false;
    text.remove_prefix(length);
  }
  return true;
}

}  // namespace internal
}  // namespace tandem
