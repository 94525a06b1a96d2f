#include "jinja/operators.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::jinja {

std::vector<size_t> SliceIndices(int64_t size, const Value& start, const Value& stop,
                                 const Value& step) {
  for (const Value* v : {&start, &stop, &step}) {
    if (!v->is_undefined() && v->kind() != Value::Kind::kInt) {
      throw JinjaError("Slice indices must be integers");
    }
  }
  const int64_t s = step.is_undefined() ? 1 : step.int_value();
  if (s == 0) throw JinjaError("slice step cannot be zero");
  int64_t begin, end;
  if (s > 0) {
    begin = start.is_undefined() ? 0 : start.int_value();
    end = stop.is_undefined() ? size : stop.int_value();
    begin = begin < 0 ? std::max<int64_t>(size + begin, 0) : std::min(begin, size);
    end = end < 0 ? std::max<int64_t>(size + end, 0) : std::min(end, size);
  } else {
    begin = start.is_undefined() ? size - 1 : start.int_value();
    end = stop.is_undefined() ? -1 : stop.int_value();
    begin = begin < 0 ? std::max<int64_t>(size + begin, -1) : std::min(begin, size - 1);
    end = end < -1 ? std::max<int64_t>(size + end, -1) : std::min(end, size - 1);
  }
  std::vector<size_t> indices;
  for (int64_t i = begin; s > 0 ? i < end : i > end; i += s) indices.push_back(i);
  return indices;
}

namespace {

Value Concatenate(const Value& left, const Value& right) {
  std::string a = left.ToString();
  const std::string b = right.ToString();
  CheckStringBytes(a.size() + b.size());
  return Value::String(a + b);
}

Value NumericBinary(const std::string& op, const Value& left, const Value& right) {
  const bool is_float = left.kind() == Value::Kind::kFloat || right.kind() == Value::Kind::kFloat;
  const double a = left.number(), b = right.number();
  const auto result = [&](double value) {
    return is_float ? Value::Float(value) : Value::Int(static_cast<int64_t>(value));
  };
  if (op == "+") return result(a + b);
  if (op == "-") return result(a - b);
  if (op == "*") return result(a * b);
  if (op == "<") return Value::Bool(a < b);
  if (op == ">") return Value::Bool(a > b);
  if (op == "<=") return Value::Bool(a <= b);
  if (op == ">=") return Value::Bool(a >= b);
  if (b == 0 && (op == "/" || op == "//" || op == "%")) throw JinjaError("division by zero");
  if (op == "/") return Value::Float(a / b);
  if (op == "//") return result(std::floor(a / b));
  if (op == "%") return result(std::fmod(a, b));
  throw JinjaError(absl::StrCat("Unknown operator \"", op, "\" between numbers"));
}

bool Contains(const Value& container, const Value& item) {
  if (container.is_list()) {
    for (const Value& element : container.list()) {
      if (LooseEquals(element, item)) return true;
    }
    return false;
  }
  if (container.is_string() && item.is_string()) {
    return container.string_value().find(item.string_value()) != std::string::npos;
  }
  if (container.kind() == Value::Kind::kDict && item.is_string()) {
    return container.dict().Find(item.string_value()) != nullptr;
  }
  throw JinjaError(absl::StrCat("Unknown operator \"in\" between ", item.TypeName(), " and ",
                                container.TypeName()));
}

}  // namespace

Value ValueBinary(const std::string& op, const Value& left, const Value& right) {
  if (op == "==") return Value::Bool(LooseEquals(left, right));
  if (op == "!=") return Value::Bool(!LooseEquals(left, right));
  if (left.is_number() && right.is_number() && op != "~" && op != "**") {
    return NumericBinary(op, left, right);
  }
  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && (op == "in" || op == "not in")) return Value::Bool(op == "not in");
    if (op == "~" && !left.is_none() && !right.is_none()) return Concatenate(left, right);
    throw JinjaError(absl::StrCat("Cannot perform operation ", op, " on undefined values"));
  }
  if (left.is_none() || right.is_none()) {
    throw JinjaError("Cannot perform operation on null values");
  }
  if (op == "~") return Concatenate(left, right);
  const auto numeric = [](const Value& v) {
    return v.is_number() || v.kind() == Value::Kind::kBool;
  };
  if (op == "**" && numeric(left) && numeric(right)) {
    const double a = left.number(), b = right.number();
    if (a == 0 && b < 0) throw JinjaError("0.0 cannot be raised to a negative power");
    const double result = std::pow(a, b);
    if (!std::isfinite(result))
      throw JinjaError("Exponentiation result is not a finite real number");
    const bool is_float =
        left.kind() == Value::Kind::kFloat || right.kind() == Value::Kind::kFloat || b < 0;
    return is_float ? Value::Float(result) : Value::Int(static_cast<int64_t>(result));
  }
  if (op == "in" || op == "not in") return Value::Bool(Contains(right, left) == (op == "in"));
  if (op == "+" && left.is_list() && right.is_list()) {
    if (left.list().size() + right.list().size() > kMaxListItems) {
      throw JinjaError("list longer than " + std::to_string(kMaxListItems) + " items");
    }
    ValueList items = left.list();
    items.insert(items.end(), right.list().begin(), right.list().end());
    return Value::List(std::move(items));
  }
  if (op == "+" && (left.is_string() || right.is_string())) return Concatenate(left, right);
  throw JinjaError(absl::StrCat("Unknown operator \"", op, "\" between ", left.TypeName(), " and ",
                                right.TypeName()));
}

}  // namespace tandem::jinja
