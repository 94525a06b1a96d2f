// Attribute access and built-in globals of the Jinja-subset engine, as @huggingface/jinja
// defines them: dict entries and dict methods (get, items, keys, values), string methods
// (upper, lower, strip, lstrip, rstrip, capitalize, startswith, endswith, split,
// replace, length), list length; globals raise_exception, namespace, range,
// strftime_now, true/false/none (and True/False/None).
#ifndef TANDEM_JINJA_METHODS_H_
#define TANDEM_JINJA_METHODS_H_

#include <ctime>
#include <functional>
#include <string>

#include "jinja/value.h"

namespace tandem::jinja {

// Thrown by raise_exception(message): the template's own error message.
class TemplateRaised : public JinjaError {
 public:
  using JinjaError::JinjaError;
};

// `object.name` / `object["name"]`: a dict or namespace entry, else a method of the
// object's type bound to it; undefined when there is none. Throws JinjaError only for
// non-string keys of a mapping.
Value GetAttribute(const Value& object, const std::string& name);

// `object[index]` for a list or string (negative counts from the end); undefined when out
// of range. Throws JinjaError for other objects.
Value GetIndex(const Value& object, int64_t index);

// Seconds since the epoch for strftime_now.
using Clock = std::function<std::time_t()>;

// The global names every template sees. strftime_now formats `clock()` in local time
// with %Y %m %d %b %B %H %M %% (English month names), other directives kept as written.
ValueDict MakeGlobals(Clock clock);

}  // namespace tandem::jinja

#endif  // TANDEM_JINJA_METHODS_H_
