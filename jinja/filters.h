// Filters (`value | name(args)`) and tests (`value is name`) of the Jinja-subset engine,
// with @huggingface/jinja's semantics. Filters: safe, tojson (indent=), length, count,
// list, first, last, reverse, join, string, trim, upper, lower, capitalize, items, default,
// int, float, abs, indent, replace, selectattr, rejectattr, map(attribute=).
// Tests: defined, undefined, none, string, number, integer, boolean, iterable, mapping,
// sequence, callable, true, false, odd, even, lower, upper, equalto/eq.
#ifndef TANDEM_JINJA_FILTERS_H_
#define TANDEM_JINJA_FILTERS_H_

#include <string>

#include "jinja/value.h"

namespace tandem::jinja {

// `operand | name(args, kwargs)`. Throws JinjaError "Unknown filter: name" (or a type
// error naming the filter and the operand's type).
Value ApplyFilter(const std::string& name, const Value& operand, const ValueList& args,
                  const ValueDict& kwargs);

// `operand is name` (with `argument` for equalto/eq). Throws JinjaError for an unknown
// test or a wrong operand type (odd/even on a non-integer).
bool ApplyTest(const std::string& name, const Value& operand, const Value& argument = Value());

}  // namespace tandem::jinja

#endif  // TANDEM_JINJA_FILTERS_H_
