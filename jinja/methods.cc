#include "jinja/methods.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jinja/js_string.h"

namespace tandem::jinja {
namespace {

Value Arg(const ValueList& args, size_t i, const ValueDict& kwargs, const char* name,
          const Value& fallback) {
  if (i < args.size()) return args[i];
  const Value* value = kwargs.Find(name);
  return value != nullptr ? *value : fallback;
}

// startswith / endswith: a string or a list of strings.
Value AffixMethod(const std::string& text, bool prefix) {
  return Value::Function([text, prefix](const ValueList& args, const ValueDict&) {
    const char* name = prefix ? "startswith" : "endswith";
    if (args.empty()) throw JinjaError(absl::StrCat(name, "() requires at least one argument"));
    const auto matches = [&](const Value& pattern) {
      if (!pattern.is_string()) throw JinjaError(absl::StrCat(name, "() needs strings"));
      const std::string& p = pattern.string_value();
      return p.size() <= text.size() &&
             text.compare(prefix ? 0 : text.size() - p.size(), p.size(), p) == 0;
    };
    if (args[0].is_list()) {
      for (const Value& item : args[0].list()) {
        if (matches(item)) return Value::Bool(true);
      }
      return Value::Bool(false);
    }
    return Value::Bool(matches(args[0]));
  });
}

ValueList SplitOnWhitespace(const std::string& text, int64_t max_split) {
  ValueList parts;
  const std::string rest = JsTrimStart(text);
  size_t pos = 0;
  while (pos < rest.size()) {
    size_t end = pos;
    while (end < rest.size() && JsSpaceAt(rest, end) == 0) ++end;
    if (max_split >= 0 && static_cast<int64_t>(parts.size()) >= max_split) {
      parts.push_back(Value::String(rest.substr(pos)));
      return parts;
    }
    parts.push_back(Value::String(rest.substr(pos, end - pos)));
    pos = end;
    while (size_t n = JsSpaceAt(rest, pos)) pos += n;
  }
  return parts;
}

Value SplitMethod(const std::string& text) {
  return Value::Function([text](const ValueList& args, const ValueDict& kwargs) {
    const Value sep = Arg(args, 0, kwargs, "sep", Value::None());
    const Value max_value = Arg(args, 1, kwargs, "maxsplit", Value::Int(-1));
    if (max_value.kind() != Value::Kind::kInt) throw JinjaError("maxsplit must be an integer");
    const int64_t max_split = max_value.int_value();
    if (sep.is_none()) return Value::List(SplitOnWhitespace(text, max_split));
    if (!sep.is_string()) throw JinjaError("split() separator must be a string or none");
    const std::string& separator = sep.string_value();
    if (separator.empty()) throw JinjaError("split(): empty separator");
    ValueList parts;
    size_t pos = 0;
    while (true) {
      const size_t found = text.find(separator, pos);
      if (found == std::string::npos ||
          (max_split >= 0 && static_cast<int64_t>(parts.size()) >= max_split)) {
        parts.push_back(Value::String(text.substr(pos)));
        return Value::List(std::move(parts));
      }
      parts.push_back(Value::String(text.substr(pos, found - pos)));
      pos = found + separator.size();
    }
  });
}

Value ReplaceMethod(const std::string& text) {
  return Value::Function([text](const ValueList& args, const ValueDict& kwargs) {
    if (args.size() < 2 || !args[0].is_string() || !args[1].is_string()) {
      throw JinjaError("replace() needs two string arguments");
    }
    const Value count_value = Arg(args, 2, kwargs, "count", Value::None());
    int64_t remaining = count_value.kind() == Value::Kind::kInt ? count_value.int_value() : -1;
    const std::string& from = args[0].string_value();
    const std::string& to = args[1].string_value();
    if (from.empty()) throw JinjaError("replace() with an empty pattern is not supported");
    std::string out;
    size_t pos = 0;
    for (size_t found; remaining != 0 && (found = text.find(from, pos)) != std::string::npos;
         --remaining) {
      out += text.substr(pos, found - pos) + to;
      CheckStringBytes(out.size());
      pos = found + from.size();
    }
    return Value::String(out + text.substr(pos));
  });
}

Value StringMethod(const std::string& text, const std::string& name) {
  using Transform = std::string (*)(absl::string_view);
  const std::vector<std::pair<const char*, Transform>> transforms = {
      {"upper", &AsciiUpper},   {"lower", &AsciiLower}, {"strip", &JsTrim},
      {"lstrip", &JsTrimStart}, {"rstrip", &JsTrimEnd},
  };
  for (const auto& [method, transform] : transforms) {
    if (name != method) continue;
    // Like the reference, strip/lstrip/rstrip ignore a characters argument.
    return Value::Function([text, transform = transform](const ValueList&, const ValueDict&) {
      return Value::String(transform(text));
    });
  }
  if (name == "capitalize") {
    return Value::Function([text](const ValueList&, const ValueDict&) {
      std::vector<std::string> chars = SplitCharacters(text);
      if (!chars.empty()) chars[0] = AsciiUpper(chars[0]);
      return Value::String(absl::StrJoin(chars, ""));
    });
  }
  if (name == "length") return Value::Int(static_cast<int64_t>(JsLength(text)));
  if (name == "startswith" || name == "endswith") return AffixMethod(text, name == "startswith");
  if (name == "split") return SplitMethod(text);
  if (name == "replace") return ReplaceMethod(text);
  return Value();
}

Value DictMethod(const Value& dict, const std::string& name) {
  if (name == "get") {
    return Value::Function([dict](const ValueList& args, const ValueDict&) {
      if (args.empty() || !args[0].is_string()) throw JinjaError("get() needs a string key");
      const Value* value = dict.dict().Find(args[0].string_value());
      if (value != nullptr) return *value;
      return args.size() > 1 ? args[1] : Value::None();
    });
  }
  if (name != "items" && name != "keys" && name != "values") return Value();
  return Value::Function([dict, name](const ValueList&, const ValueDict&) {
    ValueList out;
    for (const auto& [key, value] : dict.dict().entries()) {
      if (name == "items") out.push_back(Value::List({Value::String(key), value}));
      if (name == "keys") out.push_back(Value::String(key));
      if (name == "values") out.push_back(value);
    }
    return Value::List(std::move(out));
  });
}

std::string Strftime(std::time_t now, const std::string& format) {
  static const char* kMonths[] = {"January",   "February", "March",    "April",
                                  "May",       "June",     "July",     "August",
                                  "September", "October",  "November", "December"};
  std::tm local{};
  localtime_r(&now, &local);
  const auto pad2 = [](int n) { return n < 10 ? absl::StrCat("0", n) : absl::StrCat(n); };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    const char directive = format[++i];
    switch (directive) {
      case 'Y':
        out += absl::StrCat(local.tm_year + 1900);
        break;
      case 'm':
        out += pad2(local.tm_mon + 1);
        break;
      case 'd':
        out += pad2(local.tm_mday);
        break;
      case 'b':
        out += std::string(kMonths[local.tm_mon]).substr(0, 3);
        break;
      case 'B':
        out += kMonths[local.tm_mon];
        break;
      case 'H':
        out += pad2(local.tm_hour);
        break;
      case 'M':
        out += pad2(local.tm_min);
        break;
      case '%':
        out += '%';
        break;
      default:
        out += std::string("%") + directive;
    }
  }
  return out;
}

Value NamespaceBuiltin(const ValueList& args, const ValueDict& kwargs) {
  if (args.size() > 1) throw JinjaError("namespace() takes at most 1 positional argument");
  ValueDict entries;
  if (args.size() == 1) {
    if (args[0].kind() != Value::Kind::kDict) throw JinjaError("namespace() needs a dict");
    entries = args[0].dict();
  }
  for (const auto& [key, value] : kwargs.entries()) entries.Set(key, value);
  return Value::Namespace(std::move(entries));
}

Value RangeBuiltin(const ValueList& args, const ValueDict&) {
  for (const Value& arg : args) {
    if (arg.kind() != Value::Kind::kInt) throw JinjaError("range() needs integer arguments");
  }
  if (args.empty() || args.size() > 3) throw JinjaError("range() takes 1 to 3 arguments");
  const int64_t start = args.size() == 1 ? 0 : args[0].int_value();
  const int64_t stop = args.size() == 1 ? args[0].int_value() : args[1].int_value();
  const int64_t step = args.size() == 3 ? args[2].int_value() : 1;
  if (step == 0) throw JinjaError("range() step must not be zero");
  if ((stop - start) / step > 100000) throw JinjaError("range() longer than 100000 items");
  ValueList items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value::Int(i));
  return Value::List(std::move(items));
}

}  // namespace

Value GetAttribute(const Value& object, const std::string& name) {
  if (object.is_mapping()) {
    if (const Value* value = object.dict().Find(name)) return *value;
    return object.kind() == Value::Kind::kDict ? DictMethod(object, name) : Value();
  }
  if (object.is_string()) return StringMethod(object.string_value(), name);
  if (object.is_list() && name == "length") {
    return Value::Int(static_cast<int64_t>(object.list().size()));
  }
  return Value();
}

Value GetIndex(const Value& object, int64_t index) {
  if (object.is_list()) {
    const int64_t size = static_cast<int64_t>(object.list().size());
    if (index < 0) index += size;
    return index >= 0 && index < size ? object.list()[index] : Value();
  }
  if (object.is_string()) {
    std::vector<std::string> chars = SplitCharacters(object.string_value());
    const int64_t size = static_cast<int64_t>(chars.size());
    if (index < 0) index += size;
    return index >= 0 && index < size ? Value::String(chars[index]) : Value();
  }
  if (object.is_mapping()) {
    throw JinjaError(absl::StrCat("Cannot access property with non-string: got IntegerValue"));
  }
  return Value();
}

ValueDict MakeGlobals(Clock clock) {
  ValueDict globals;
  globals.Set("namespace", Value::Function(&NamespaceBuiltin));
  globals.Set("range", Value::Function(&RangeBuiltin));
  globals.Set(
      "raise_exception", Value::Function([](const ValueList& args, const ValueDict&) -> Value {
        throw TemplateRaised(args.empty() ? "raise_exception() called" : args[0].ToString());
      }));
  globals.Set("strftime_now", Value::Function([clock](const ValueList& args, const ValueDict&) {
                if (args.empty() || !args[0].is_string()) {
                  throw JinjaError("strftime_now() needs a format string");
                }
                return Value::String(Strftime(clock(), args[0].string_value()));
              }));
  for (const char* name : {"true", "True"}) globals.Set(name, Value::Bool(true));
  for (const char* name : {"false", "False"}) globals.Set(name, Value::Bool(false));
  for (const char* name : {"none", "None"}) globals.Set(name, Value::None());
  return globals;
}

}  // namespace tandem::jinja
