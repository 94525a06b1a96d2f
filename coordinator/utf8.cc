#include "coordinator/utf8.h"

#include <cstdint>

namespace tandem::coordinator {
namespace {

// Valid range of the second byte for a given lead byte, per RFC 3629 table 3-7; the
// third and fourth bytes are always 0x80..0xBF. Returns the character length, or 0 for
// a byte that cannot lead a character.
int LeadByteInfo(uint8_t lead, uint8_t* second_min, uint8_t* second_max) {
  *second_min = 0x80;
  *second_max = 0xBF;
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;  // Continuation byte, or overlong 2-byte lead.
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) {
    if (lead == 0xE0) *second_min = 0xA0;  // No overlong 3-byte forms.
    if (lead == 0xED) *second_max = 0x9F;  // No surrogates.
    return 3;
  }
  if (lead < 0xF5) {
    if (lead == 0xF0) *second_min = 0x90;  // No overlong 4-byte forms.
    if (lead == 0xF4) *second_max = 0x8F;  // Nothing above U+10FFFF.
    return 4;
  }
  return 0;
}

// Number of bytes of `bytes[0..available)` that match the character starting at
// bytes[0] (at most its full length); sets *length to the full character length, 0 when
// bytes[0] cannot lead a character.
size_t MatchingPrefix(const uint8_t* bytes, size_t available, int* length) {
  uint8_t second_min, second_max;
  *length = LeadByteInfo(bytes[0], &second_min, &second_max);
  if (*length == 0) return 0;
  size_t matched = 1;
  for (int i = 1; i < *length && matched < available; ++i) {
    const uint8_t lo = i == 1 ? second_min : 0x80;
    const uint8_t hi = i == 1 ? second_max : 0xBF;
    if (bytes[i] < lo || bytes[i] > hi) break;
    ++matched;
  }
  return matched;
}

}  // namespace

size_t FindInvalidUtf8(absl::string_view text) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    if (bytes[i] < 0x80) {  // ASCII fast path.
      ++i;
      continue;
    }
    int length = 0;
    const size_t matched = MatchingPrefix(bytes + i, text.size() - i, &length);
    if (length == 0 || matched < static_cast<size_t>(length)) return i;
    i += length;
  }
  return absl::string_view::npos;
}

size_t IncompleteUtf8SuffixLength(absl::string_view text) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  // A cut-short character starts at most 3 bytes before the end.
  const size_t earliest = text.size() > 3 ? text.size() - 3 : 0;
  for (size_t start = text.size(); start-- > earliest;) {
    if ((bytes[start] & 0xC0) == 0x80) continue;  // Continuation: look further back.
    int length = 0;
    const size_t available = text.size() - start;
    const size_t matched = MatchingPrefix(bytes + start, available, &length);
    return (length > 1 && matched == available && available < static_cast<size_t>(length))
               ? available
               : 0;
  }
  return 0;
}

}  // namespace tandem::coordinator
