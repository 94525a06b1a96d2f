#include "jinja/filters.h"

#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "jinja/js_string.h"
#include "jinja/methods.h"

namespace tandem::jinja {
namespace {

[[noreturn]] void CannotApply(const std::string& name, const Value& operand) {
  throw JinjaError(
      absl::StrCat("Cannot apply filter \"", name, "\" to type: ", operand.TypeName()));
}

const Value* Argument(const ValueList& args, size_t i, const ValueDict& kwargs, const char* key) {
  if (i < args.size()) return &args[i];
  return kwargs.Find(key);
}

Value ToJsonFilter(const Value& operand, const ValueDict& kwargs) {
  int indent = -1;
  for (const auto& [key, value] : kwargs.entries()) {
    if (key == "indent" && value.kind() == Value::Kind::kInt) {
      indent = static_cast<int>(std::min<int64_t>(value.int_value(), 64));
    } else if (key == "indent" && value.is_none()) {
    } else if (key == "ensure_ascii" && value.kind() == Value::Kind::kBool && !value.bool_value()) {
    } else {
      throw JinjaError(absl::StrCat("tojson: unsupported argument ", key, "=", value.ToJson()));
    }
  }
  return Value::String(operand.ToJson(indent));
}

Value JoinFilter(const Value& operand, const ValueList& args, const ValueDict& kwargs) {
  const Value* separator = Argument(args, 0, kwargs, "separator");
  if (separator != nullptr && !separator->is_string()) {
    throw JinjaError("join: separator must be a string");
  }
  std::vector<std::string> parts;
  if (operand.is_string()) {
    parts = SplitCharacters(operand.string_value());
  } else if (operand.is_list()) {
    size_t bytes = 0;
    for (const Value& item : operand.list()) {
      parts.push_back(item.ToString());
      bytes += parts.back().size() + (separator ? separator->string_value().size() : 0);
      CheckStringBytes(bytes);
    }
  } else {
    CannotApply("join", operand);
  }
  return Value::String(absl::StrJoin(parts, separator ? separator->string_value() : ""));
}

Value IndentFilter(const Value& operand, const ValueList& args, const ValueDict& kwargs) {
  if (!operand.is_string()) CannotApply("indent", operand);
  const Value* width = Argument(args, 0, kwargs, "width");
  const Value* first = Argument(args, 1, kwargs, "first");
  const Value* blank = Argument(args, 2, kwargs, "blank");
  std::string prefix(4, ' ');
  if (width != nullptr && width->is_string()) {
    prefix = width->string_value();
  } else if (width != nullptr && width->kind() == Value::Kind::kInt) {
    prefix = std::string(std::max<int64_t>(0, std::min<int64_t>(width->int_value(), 256)), ' ');
  } else if (width != nullptr) {
    throw JinjaError("indent: width must be an integer or a string");
  }
  std::vector<std::string> lines = absl::StrSplit(operand.string_value(), '\n');
  CheckStringBytes(operand.string_value().size() + lines.size() * prefix.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const bool skip = (i == 0 && !(first && first->Truthy())) ||
                      (lines[i].empty() && !(blank && blank->Truthy()));
    if (!skip) lines[i] = prefix + lines[i];
  }
  return Value::String(absl::StrJoin(lines, "\n"));
}

Value SelectAttrFilter(const Value& operand, const ValueList& args, bool select) {
  const char* name = select ? "selectattr" : "rejectattr";
  if (!operand.is_list()) CannotApply(name, operand);
  if (args.empty() || !args[0].is_string()) {
    throw JinjaError(absl::StrCat(name, ": needs an attribute name"));
  }
  ValueList out;
  for (const Value& item : operand.list()) {
    if (!item.is_mapping()) {
      throw JinjaError(absl::StrCat("`", name, "` can only be applied to array of objects"));
    }
    const Value* attribute = item.dict().Find(args[0].string_value());
    bool result = false;
    if (attribute != nullptr) {
      result = args.size() > 1
                   ? ApplyTest(args[1].ToString(), *attribute, args.size() > 2 ? args[2] : Value())
                   : attribute->Truthy();
    }
    if (result == select) out.push_back(item);
  }
  return Value::List(std::move(out));
}

Value MapFilter(const Value& operand, const ValueDict& kwargs) {
  if (!operand.is_list()) CannotApply("map", operand);
  const Value* attribute = kwargs.Find("attribute");
  if (attribute == nullptr || !attribute->is_string()) {
    throw JinjaError("map: only map(attribute='name') is supported");
  }
  const Value* fallback = kwargs.Find("default");
  ValueList out;
  for (const Value& item : operand.list()) {
    if (!item.is_mapping()) throw JinjaError("items in map must be an object");
    Value value = GetAttribute(item, attribute->string_value());
    out.push_back(value.is_undefined() && fallback ? *fallback : value);
  }
  return Value::List(std::move(out));
}

Value NumberFilter(const std::string& name, const Value& operand, const ValueList& args,
                   const ValueDict& kwargs) {
  const bool to_int = name == "int";
  if (operand.is_string()) {
    const char* text = operand.string_value().c_str();
    char* end = nullptr;
    const double parsed =
        to_int ? static_cast<double>(std::strtoll(text, &end, 10)) : std::strtod(text, &end);
    if (end == text) {
      const Value* fallback = Argument(args, 0, kwargs, "default");
      if (fallback != nullptr) return *fallback;
      return to_int ? Value::Int(0) : Value::Float(0);
    }
    return to_int ? Value::Int(static_cast<int64_t>(parsed)) : Value::Float(parsed);
  }
  if (operand.is_number() || operand.kind() == Value::Kind::kBool) {
    return to_int ? Value::Int(static_cast<int64_t>(std::trunc(operand.number())))
                  : Value::Float(operand.number());
  }
  CannotApply(name, operand);
}

// Filters that take no arguments.
Value SimpleFilter(const std::string& name, const Value& operand) {
  if (name == "length" || name == "count") {
    if (operand.is_string()) return GetAttribute(operand, "length");
    if (operand.is_list()) return Value::Int(static_cast<int64_t>(operand.list().size()));
    if (operand.kind() == Value::Kind::kDict) {
      return Value::Int(static_cast<int64_t>(operand.dict().entries().size()));
    }
  } else if (name == "list" && operand.is_list()) {
    return operand;
  } else if ((name == "first" || name == "last") && operand.is_list()) {
    return GetIndex(operand, name == "first" ? 0 : -1);
  } else if (name == "reverse" && operand.is_list()) {
    return Value::List(ValueList(operand.list().rbegin(), operand.list().rend()));
  } else if (name == "string") {
    return Value::String(operand.ToString());
  } else if (name == "trim" && operand.is_string()) {
    return Value::String(JsTrim(operand.string_value()));
  } else if ((name == "upper" || name == "lower" || name == "capitalize") && operand.is_string()) {
    return GetAttribute(operand, name).function()({}, {});
  } else if (name == "items" && operand.kind() == Value::Kind::kDict) {
    return GetAttribute(operand, "items").function()({}, {});
  } else if (name == "abs" && operand.is_number()) {
    return operand.kind() == Value::Kind::kInt ? Value::Int(std::llabs(operand.int_value()))
                                               : Value::Float(std::fabs(operand.number()));
  } else if (name == "safe") {
    return operand;
  }
  for (const char* known : {"length", "count", "list", "first", "last", "reverse", "trim", "upper",
                            "lower", "capitalize", "items", "abs"}) {
    if (name == known) CannotApply(name, operand);
  }
  throw JinjaError(absl::StrCat("Unknown filter: ", name));
}

}  // namespace

Value ApplyFilter(const std::string& name, const Value& operand, const ValueList& args,
                  const ValueDict& kwargs) {
  if (name == "tojson") return ToJsonFilter(operand, kwargs);
  if (name == "join") return JoinFilter(operand, args, kwargs);
  if (name == "indent") return IndentFilter(operand, args, kwargs);
  if (name == "selectattr" || name == "rejectattr") {
    return SelectAttrFilter(operand, args, name == "selectattr");
  }
  if (name == "map") return MapFilter(operand, kwargs);
  if (name == "int" || name == "float") return NumberFilter(name, operand, args, kwargs);
  if (name == "default" || name == "d") {
    const Value* fallback = Argument(args, 0, kwargs, "default_value");
    const Value* boolean = Argument(args, 1, kwargs, "boolean");
    const bool use_fallback =
        operand.is_undefined() || (boolean != nullptr && boolean->Truthy() && !operand.Truthy());
    return use_fallback ? (fallback ? *fallback : Value::String("")) : operand;
  }
  if (name == "replace") {
    if (!operand.is_string()) CannotApply(name, operand);
    return GetAttribute(operand, "replace").function()(args, kwargs);
  }
  if (!args.empty() || !kwargs.entries().empty()) {
    throw JinjaError(absl::StrCat("filter ", name, " takes no arguments"));
  }
  return SimpleFilter(name, operand);
}

bool ApplyTest(const std::string& name, const Value& operand, const Value& argument) {
  using Kind = Value::Kind;
  const Kind kind = operand.kind();
  if (name == "defined") return kind != Kind::kUndefined;
  if (name == "undefined") return kind == Kind::kUndefined;
  if (name == "none") return kind == Kind::kNone;
  if (name == "string") return kind == Kind::kString;
  if (name == "number") return operand.is_number();
  if (name == "integer") return kind == Kind::kInt;
  if (name == "boolean") return kind == Kind::kBool;
  if (name == "iterable") return kind == Kind::kList || kind == Kind::kString;
  if (name == "mapping") return kind == Kind::kDict;
  if (name == "sequence")
    return kind == Kind::kList || kind == Kind::kDict || kind == Kind::kString;
  if (name == "callable") return kind == Kind::kFunction;
  if (name == "true" || name == "false") {
    return kind == Kind::kBool && operand.bool_value() == (name == "true");
  }
  if (name == "odd" || name == "even") {
    if (kind != Kind::kInt)
      throw JinjaError(absl::StrCat("cannot ", name, " on ", operand.TypeName()));
    return (operand.int_value() % 2 != 0) == (name == "odd");
  }
  if (name == "lower" || name == "upper") {
    if (kind != Kind::kString) return false;
    const std::string& text = operand.string_value();
    return text == (name == "lower" ? AsciiLower(text) : AsciiUpper(text));
  }
  if (name == "equalto" || name == "eq") return LooseEquals(operand, argument);
  throw JinjaError(absl::StrCat("Unknown test: ", name));
}

}  // namespace tandem::jinja
