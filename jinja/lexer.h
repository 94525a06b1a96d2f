// Tokenizer of the Jinja-subset engine. Applies the options chat templates are rendered
// with (trim_blocks, lstrip_blocks, one trailing newline dropped) and the `-` whitespace
// control of {%- -%} {{- -}} {#- -#}, as @huggingface/jinja does.
#ifndef TANDEM_JINJA_LEXER_H_
#define TANDEM_JINJA_LEXER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::jinja {

enum class TokenType {
  kText,             // template text between tags
  kNumber,           // 12, 1.5, -3 (a sign is part of the literal where it cannot be binary)
  kString,           // 'abc' or "abc", escapes resolved
  kIdentifier,       // names and keywords (if, for, in, not, is, ...)
  kEquals,           // =
  kOpenParen,        // (
  kCloseParen,       // )
  kOpenStatement,    // {%
  kCloseStatement,   // %}
  kOpenExpression,   // {{
  kCloseExpression,  // }}
  kOpenBracket,      // [
  kCloseBracket,     // ]
  kOpenBrace,        // {
  kCloseBrace,       // }
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kComparison,      // < > <= >= == !=
  kUnary,           // a lone + or - in unary position
  kComment,         // {# ... #}
};

struct Token {
  TokenType type;
  std::string value;
};

// The tokens of `source`; INVALID_ARGUMENT naming the problem (unexpected character,
// unterminated string or comment, bad escape) on malformed input.
absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source);

}  // namespace tandem::jinja

#endif  // TANDEM_JINJA_LEXER_H_
