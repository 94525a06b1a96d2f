// Strict UTF-8 checks (RFC 3629): no overlong forms, no surrogates (U+D800..U+DFFF),
// nothing above U+10FFFF. Pure functions over bytes; no allocation.
#ifndef TANDEM_COORDINATOR_UTF8_H_
#define TANDEM_COORDINATOR_UTF8_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace tandem::coordinator {

// Byte offset of the first byte that does not start a complete, valid UTF-8
// character, or absl::string_view::npos when `text` is entirely valid. A character cut
// short by the end of `text` counts as invalid (its first byte is reported).
size_t FindInvalidUtf8(absl::string_view text);

// True when `text` is entirely valid UTF-8 (the empty string is valid).
inline bool IsValidUtf8(absl::string_view text) {
  return FindInvalidUtf8(text) == absl::string_view::npos;
}

// Length in bytes (0..3) of the trailing bytes of `text` that form the beginning of a
// valid multi-byte character which the end of `text` cuts short, i.e. bytes that might
// still become a valid character when more bytes arrive. 0 when `text` ends at a
// character boundary or its tail can never become valid.
size_t IncompleteUtf8SuffixLength(absl::string_view text);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_UTF8_H_
