#include "model/utf8.h"

namespace tandem {
namespace internal {

size_t Utf8CharLength(absl::string_view text) {
  if (text.empty()) return 0;
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char lead = bytes[0];
  if (lead < 0x80) return 1;
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
    return 0;
  }
  if (text.size() < length) return 0;
  if (bytes[1] < low || bytes[1] > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if ((bytes[k] & 0xC0) != 0x80) return 0;
  }
  return length;
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
