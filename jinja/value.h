// Runtime values of the Jinja-subset engine (//jinja), with the semantics of the
// @huggingface/jinja reference implementation: how a value prints, compares, tests as a
// boolean and serialises to JSON. Lists, dicts and namespaces have reference semantics
// (copies of a Value share the container), like the reference's JavaScript objects.
#ifndef TANDEM_JINJA_VALUE_H_
#define TANDEM_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tandem::jinja {

// A template error (syntax, type, unknown filter, raise_exception). Thrown inside the
// engine only; the public entry points (jinja/template.h) turn it into an absl::Status.
class JinjaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bounds on what a template can build, so that a hostile template cannot exhaust memory or
// the stack: strings (and JSON text), list lengths, and nesting of values.
inline constexpr size_t kMaxStringBytes = size_t{16} << 20;
inline constexpr size_t kMaxListItems = size_t{1} << 20;
inline constexpr int kMaxValueDepth = 100;

// Throws JinjaError when a string of `bytes` would pass kMaxStringBytes.
void CheckStringBytes(size_t bytes);

class Value;
using ValueList = std::vector<Value>;

// String-keyed map that keeps insertion order (the order tojson and items() use).
class ValueDict {
 public:
  // The value under `key`, or null when absent (pointer valid until the next Set).
  const Value* Find(const std::string& key) const;
  // Inserts or replaces `key` (a replaced key keeps its position).
  void Set(const std::string& key, Value value);
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

// A built-in callable: positional arguments, then keyword arguments.
using ValueFunction = std::function<Value(const ValueList& args, const ValueDict& kwargs)>;

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kFunction
  };

  Value() = default;  // undefined
  static Value None();
  static Value Bool(bool value);
  static Value Int(int64_t value);
  static Value Float(double value);
  static Value String(std::string value);
  static Value List(ValueList items);
  static Value Dict(ValueDict entries);
  static Value Namespace(ValueDict entries);
  static Value Function(ValueFunction function);
  // JSON null/bool/number/string/array/object -> None/Bool/Int or Float/String/List/Dict
  // (object keys in their order in `json`).
  static Value FromJson(const nlohmann::ordered_json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_list() const { return kind_ == Kind::kList; }
  // A dict or a namespace (both hold attributes).
  bool is_mapping() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }

  // Accessors; each requires the matching kind (checked by the caller).
  bool bool_value() const { return bool_; }
  int64_t int_value() const { return int_; }
  // The number as a double (Int or Float; Bool as 0/1).
  double number() const;
  const std::string& string_value() const { return *string_; }
  const ValueList& list() const { return *list_; }
  ValueList& mutable_list() const { return *list_; }
  const ValueDict& dict() const { return *dict_; }
  ValueDict& mutable_dict() const { return *dict_; }
  const ValueFunction& function() const { return *function_; }

  // Python truthiness: empty strings, lists and dicts, 0, none and undefined are false.
  bool Truthy() const;
  // The text `{{ value }}` and string concatenation produce: strings as they are,
  // true/false, integers in decimal, floats as JavaScript prints them (1.0 when integral),
  // lists and dicts as JSON; "" for none and undefined.
  std::string ToString() const;
  // JSON as the tojson filter writes it (separators ", " and ": ", or "," and ": " with
  // one entry per line when indent > 0; non-ASCII kept). undefined writes null. Throws
  // JinjaError past kMaxStringBytes or kMaxValueDepth.
  std::string ToJson(int indent = -1) const;
  // The reference's type name for error messages ("StringValue", "ArrayValue", ...).
  std::string TypeName() const;

 private:
  explicit Value(Kind kind) : kind_(kind) {}

  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<const ValueFunction> function_;
};

// True when `target` (a dict or namespace) is `from` or is reachable from it through
// lists, dicts and namespaces (assigning `from` into `target` would make a cycle).
bool Reaches(const Value& from, const Value& target);

// The reference's `==`: none equals undefined; numbers and booleans compare by number;
// strings by content; lists, dicts and functions by identity.
bool LooseEquals(const Value& a, const Value& b);

// A JSON string literal for `text` as JavaScript's JSON.stringify writes it.
std::string JsonQuote(const std::string& text);

// A double as JavaScript's Number.prototype.toString writes it.
std::string FormatJsNumber(double value);

}  // namespace tandem::jinja

#endif  // TANDEM_JINJA_VALUE_H_
