// UTF-8 helpers shared by the tokenizer's parts. Internal to the tokenizer library.
#ifndef TANDEM_MODEL_UTF8_H_
#define TANDEM_MODEL_UTF8_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace tandem {
namespace internal {

// Length in bytes (1..4) of the well-formed UTF-8 character that `text` starts
// with; 0 when `text` is empty or starts with a malformed or truncated sequence
// (overlong forms, surrogates U+D800..U+DFFF and code points above U+10FFFF are
// malformed).
size_t Utf8CharLength(absl::string_view text);

// True when all of `text` is well-formed UTF-8.
bool IsWellFormedUtf8(absl::string_view text);

// Length of the longest prefix of `text` that begins a well-formed character
// without completing it (the "maximal subpart" of Unicode's chapter 3); 0 when
// `text` starts with a whole character, with a byte that cannot begin one, or is
// empty.
size_t Utf8PartialLength(absl::string_view text);

// Appends `bytes` to `out` as well-formed UTF-8: each maximal subpart of an ill-formed
// sequence (or single invalid byte) becomes one U+FFFD, as the WHATWG / Rust
// `from_utf8_lossy` decoders do.
void AppendUtf8Lossy(absl::string_view bytes, std::string* out);

// True when `bytes` ends with the beginning of a well-formed character that more
// bytes could complete (so decoding should wait for them).
bool EndsWithPartialCharacter(absl::string_view bytes);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_MODEL_UTF8_H_
