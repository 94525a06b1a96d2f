// Binary operators and slices of the Jinja-subset engine, with @huggingface/jinja's
// semantics: arithmetic on integers and floats (integer results stay integers),
// comparisons of numbers, == and != on any values, ~ and string +, list +, `in` and
// `not in` on lists, strings and dicts.
#ifndef TANDEM_JINJA_OPERATORS_H_
#define TANDEM_JINJA_OPERATORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace tandem::jinja {

// `left op right` for op in + - * / // % ~ == != < > <= >= in "not in" (not and/or,
// which short-circuit in the interpreter). Throws JinjaError for operand types the
// operator does not take (naming the operator and both types) and division by zero.
Value ValueBinary(const std::string& op, const Value& left, const Value& right);

// The indices `sequence[start:stop:step]` selects from a sequence of `size` items, as
// Python computes them; undefined bounds take their defaults. Throws JinjaError for a
// non-integer bound or a zero step.
std::vector<size_t> SliceIndices(int64_t size, const Value& start, const Value& stop,
                                 const Value& step);

}  // namespace tandem::jinja

#endif  // TANDEM_JINJA_OPERATORS_H_
