// String operations with JavaScript's semantics on UTF-8 text, as the reference
// (@huggingface/jinja, which works on JavaScript strings) applies them: whitespace is
// JavaScript's \s (ASCII and Unicode spaces, BOM, line and paragraph separators),
// lengths count UTF-16 code units. Malformed UTF-8 bytes count as one character each.
#ifndef TANDEM_JINJA_JS_STRING_H_
#define TANDEM_JINJA_JS_STRING_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tandem::jinja {

// Bytes of the whitespace character that starts `text` at `pos`; 0 when that character
// is not whitespace (or pos is at the end).
size_t JsSpaceAt(absl::string_view text, size_t pos);
// Bytes of the whitespace character that ends `text[0, end)`; 0 when there is none.
size_t JsSpaceBefore(absl::string_view text, size_t end);

// String.prototype.trim / trimStart / trimEnd.
std::string JsTrim(absl::string_view text);
std::string JsTrimStart(absl::string_view text);
std::string JsTrimEnd(absl::string_view text);

// The characters (code points) of `text`, each as its UTF-8 bytes.
std::vector<std::string> SplitCharacters(absl::string_view text);
// Length in UTF-16 code units (String.prototype.length).
size_t JsLength(absl::string_view text);

// ASCII-only case mapping (other bytes unchanged).
std::string AsciiUpper(absl::string_view text);
std::string AsciiLower(absl::string_view text);

}  // namespace tandem::jinja

#endif  // TANDEM_JINJA_JS_STRING_H_
