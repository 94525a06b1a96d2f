#include "jinja/js_string.h"

#include <cstdint>

#include "model/utf8.h"

namespace tandem::jinja {
namespace {

// Code point of the well-formed character of `length` bytes at `text`.
uint32_t DecodeCodePoint(absl::string_view text, size_t length) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  if (length == 1) return byte(0);
  uint32_t code = byte(0) & (0xFF >> (length + 1));
  for (size_t i = 1; i < length; ++i) code = (code << 6) | (byte(i) & 0x3F);
  return code;
}

bool IsJsSpaceCodePoint(uint32_t code) {
  if (code <= 32) return code == 32 || (code >= 9 && code <= 13);
  return code == 0xA0 || code == 0x1680 || (code >= 0x2000 && code <= 0x200A) || code == 0x2028 ||
         code == 0x2029 || code == 0x202F || code == 0x205F || code == 0x3000 || code == 0xFEFF;
}

// Byte length of the character at `pos` (1 for a malformed byte).
size_t CharLengthAt(absl::string_view text, size_t pos) {
  const size_t length = internal::Utf8CharLength(text.substr(pos));
  return length == 0 ? 1 : length;
}

}  // namespace

size_t JsSpaceAt(absl::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  const size_t length = internal::Utf8CharLength(text.substr(pos));
  if (length == 0) return 0;
  return IsJsSpaceCodePoint(DecodeCodePoint(text.substr(pos), length)) ? length : 0;
}

size_t JsSpaceBefore(absl::string_view text, size_t end) {
  // A character is at most 4 bytes: try each possible start.
  for (size_t length = 1; length <= 4 && length <= end; ++length) {
    const size_t start = end - length;
    if (internal::Utf8CharLength(text.substr(start)) == length) {
      return JsSpaceAt(text, start);
    }
  }
  return 0;
}

std::string JsTrimStart(absl::string_view text) {
  size_t pos = 0;
  while (size_t n = JsSpaceAt(text, pos)) pos += n;
  return std::string(text.substr(pos));
}

std::string JsTrimEnd(absl::string_view text) {
  size_t end = text.size();
  while (size_t n = JsSpaceBefore(text, end)) end -= n;
  return std::string(text.substr(0, end));
}

std::string JsTrim(absl::string_view text) { return JsTrimEnd(JsTrimStart(text)); }

std::vector<std::string> SplitCharacters(absl::string_view text) {
  std::vector<std::string> characters;
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = CharLengthAt(text, pos);
    characters.emplace_back(text.substr(pos, length));
    pos += length;
  }
  return characters;
}

size_t JsLength(absl::string_view text) {
  size_t units = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = CharLengthAt(text, pos);
    units += length == 4 ? 2 : 1;
    pos += length;
  }
  return units;
}

std::string AsciiUpper(absl::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string AsciiLower(absl::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace tandem::jinja
