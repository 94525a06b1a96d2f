// UTF-8 helpers shared by the tokenizer's parts. Internal to the tokenizer library.
#ifndef TANDEM_MODEL_UTF8_H_
#define TANDEM_MODEL_UTF8_H_

#include <cstddef>

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

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_MODEL_UTF8_H_
