#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tandem::jinja {

void CheckStringBytes(size_t bytes) {
  if (bytes > kMaxStringBytes) {
    throw JinjaError("string longer than " + std::to_string(kMaxStringBytes) + " bytes");
  }
}

const Value* ValueDict::Find(const std::string& key) const {
  for (const auto& [k, v] : entries_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ValueDict::Set(const std::string& key, Value value) {
  for (auto& [k, v] : entries_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(key, std::move(value));
}

Value Value::None() { return Value(Kind::kNone); }

Value Value::Bool(bool value) {
  Value v(Kind::kBool);
  v.bool_ = value;
  return v;
}

Value Value::Int(int64_t value) {
  Value v(Kind::kInt);
  v.int_ = value;
  return v;
}

Value Value::Float(double value) {
  Value v(Kind::kFloat);
  v.float_ = value;
  return v;
}

Value Value::String(std::string value) {
  Value v(Kind::kString);
  v.string_ = std::make_shared<const std::string>(std::move(value));
  return v;
}

Value Value::List(ValueList items) {
  Value v(Kind::kList);
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}

Value Value::Dict(ValueDict entries) {
  Value v(Kind::kDict);
  v.dict_ = std::make_shared<ValueDict>(std::move(entries));
  return v;
}

Value Value::Namespace(ValueDict entries) {
  Value v = Dict(std::move(entries));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::Function(ValueFunction function) {
  Value v(Kind::kFunction);
  v.function_ = std::make_shared<const ValueFunction>(std::move(function));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return String(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      for (const auto& item : json) items.push_back(FromJson(item));
      return List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict entries;
      for (const auto& [key, item] : json.items()) entries.Set(key, FromJson(item));
      return Dict(std::move(entries));
    }
    default:
      throw JinjaError("unsupported JSON value (binary or discarded)");
  }
}

double Value::number() const {
  if (kind_ == Kind::kFloat) return float_;
  if (kind_ == Kind::kBool) return bool_ ? 1 : 0;
  return static_cast<double>(int_);
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0 && !std::isnan(float_);
    case Kind::kString:
      return !string_->empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->entries().empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return "";
    case Kind::kBool:
      return bool_ ? "true" : "false";
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kFloat:
      if (float_ == 0 && std::signbit(float_)) return "-0.0";
      if (std::isfinite(float_) && float_ == std::trunc(float_) && std::fabs(float_) < 1e21) {
        char buffer[64];
        std::snprintf(buffer, sizeof(buffer), "%.1f", float_);
        return buffer;
      }
      return FormatJsNumber(float_);
    case Kind::kString:
      return *string_;
    case Kind::kList:
    case Kind::kDict:
    case Kind::kNamespace:
      return ToJson();
    case Kind::kFunction:
      throw JinjaError("cannot convert a function to a string");
  }
  return "";
}

namespace {

void AppendJson(const Value& value, int indent, int depth, std::string* out) {
  if (depth > kMaxValueDepth) throw JinjaError("value nested too deeply to print");
  CheckStringBytes(out->size());
  const std::string item_separator = indent > 0 ? "," : ", ";
  const std::string padding = indent > 0 ? "\n" + std::string(indent * depth, ' ') : "";
  const std::string child_padding = indent > 0 ? padding + std::string(indent, ' ') : "";
  switch (value.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      *out += "null";
      return;
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      *out += value.ToString();
      return;
    case Value::Kind::kFloat:
      *out += std::isfinite(value.number()) ? FormatJsNumber(value.number()) : "null";
      return;
    case Value::Kind::kString:
      *out += JsonQuote(value.string_value());
      return;
    case Value::Kind::kList: {
      const ValueList& items = value.list();
      *out += "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += item_separator;
        *out += child_padding;
        AppendJson(items[i], indent, depth + 1, out);
      }
      if (!items.empty()) *out += padding;
      *out += "]";
      return;
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      const auto& entries = value.dict().entries();
      *out += "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) *out += item_separator;
        *out += child_padding + JsonQuote(entries[i].first) + ": ";
        AppendJson(entries[i].second, indent, depth + 1, out);
      }
      if (!entries.empty()) *out += padding;
      *out += "}";
      return;
    }
    case Value::Kind::kFunction:
      throw JinjaError("Cannot convert to JSON: FunctionValue");
  }
}

}  // namespace

std::string Value::ToJson(int indent) const {
  std::string out;
  AppendJson(*this, indent, 0, &out);
  return out;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "UndefinedValue";
    case Kind::kNone:
      return "NullValue";
    case Kind::kBool:
      return "BooleanValue";
    case Kind::kInt:
      return "IntegerValue";
    case Kind::kFloat:
      return "FloatValue";
    case Kind::kString:
      return "StringValue";
    case Kind::kList:
      return "ArrayValue";
    case Kind::kDict:
      return "ObjectValue";
    case Kind::kNamespace:
      return "NamespaceValue";
    case Kind::kFunction:
      return "FunctionValue";
  }
  return "";
}

namespace {

bool ReachesWithin(const Value& from, const ValueDict* target, int depth) {
  if (depth > kMaxValueDepth) return true;  // too deep to tell: treat as a cycle
  if (from.is_mapping()) {
    if (&from.dict() == target) return true;
    for (const auto& entry : from.dict().entries()) {
      if (ReachesWithin(entry.second, target, depth + 1)) return true;
    }
  } else if (from.is_list()) {
    for (const Value& item : from.list()) {
      if (ReachesWithin(item, target, depth + 1)) return true;
    }
  }
  return false;
}

}  // namespace

bool Reaches(const Value& from, const Value& target) {
  return target.is_mapping() && ReachesWithin(from, &target.dict(), 0);
}

bool LooseEquals(const Value& a, const Value& b) {
  const bool a_nullish = a.is_undefined() || a.is_none();
  const bool b_nullish = b.is_undefined() || b.is_none();
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  const auto numeric = [](const Value& v) {
    return v.is_number() || v.kind() == Value::Kind::kBool;
  };
  if (numeric(a) && numeric(b)) return a.number() == b.number();
  if (a.is_string() && b.is_string()) return a.string_value() == b.string_value();
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kList:
      return &a.list() == &b.list();
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      return &a.dict() == &b.dict();
    case Value::Kind::kFunction:
      return &a.function() == &b.function();
    default:
      return false;
  }
}

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
          out += buffer;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string FormatJsNumber(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0) return "0";
  std::string sign = value < 0 ? "-" : "";
  char buffer[64];
  // Shortest round-trip digits in scientific form: d[.ddd]e[+-]xx.
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), std::fabs(value),
                              std::chars_format::scientific);
  std::string scientific(buffer, result.ptr);
  size_t e = scientific.find('e');
  std::string digits = scientific.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int k = static_cast<int>(digits.size());
  const int n = std::atoi(scientific.c_str() + e + 1) + 1;  // value = 0.digits * 10^n
  if (k <= n && n <= 21) return sign + digits + std::string(n - k, '0');
  if (0 < n && n <= 21) return sign + digits.substr(0, n) + "." + digits.substr(n);
  if (-6 < n && n <= 0) return sign + "0." + std::string(-n, '0') + digits;
  std::string mantissa = k == 1 ? digits : digits.substr(0, 1) + "." + digits.substr(1);
  return sign + mantissa + "e" + (n - 1 >= 0 ? "+" : "-") + std::to_string(std::abs(n - 1));
}

}  // namespace tandem::jinja
