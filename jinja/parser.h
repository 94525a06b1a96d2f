// Parser of the Jinja-subset engine: tokens (jinja/lexer.h) to a Program (jinja/ast.h).
// Statements: if/elif/else, for (with loop filter and else), set (also block set and
// namespace attributes), break, continue, comments. Expressions: literals, lists, tuples,
// dicts, member access and slices, calls with keyword arguments, filters, `is` tests,
// arithmetic, comparison, `in`/`not in`, and/or/not, `x if c else y`. Anything else
// (macro, call, filter blocks, include, ...) is an error naming the construct.
#ifndef TANDEM_JINJA_PARSER_H_
#define TANDEM_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace tandem::jinja {

// Nesting deeper than this (statements in statements, or expression depth) is rejected,
// so that hostile templates cannot exhaust the stack.
inline constexpr int kMaxNestingDepth = 200;

// INVALID_ARGUMENT "template syntax error: <what>" on malformed input.
absl::StatusOr<Program> Parse(const std::vector<Token>& tokens);

}  // namespace tandem::jinja

#endif  // TANDEM_JINJA_PARSER_H_
