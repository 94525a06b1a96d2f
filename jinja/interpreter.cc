#include "jinja/interpreter.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "jinja/filters.h"
#include "jinja/js_string.h"
#include "jinja/methods.h"
#include "jinja/operators.h"

namespace tandem::jinja {
namespace {

// Bounds the work of nested loops (over range() or long lists).
constexpr size_t kMaxLoopIterations = 250000;

// Variables of one scope (the template's, or one for loop's), over its parent's.
struct Scope {
  ValueDict variables;
  const Scope* parent = nullptr;

  Value Lookup(const std::string& name) const {
    for (const Scope* scope = this; scope != nullptr; scope = scope->parent) {
      if (const Value* value = scope->variables.Find(name)) return *value;
    }
    return Value();
  }
};

class Interpreter {
 public:
  explicit Interpreter(size_t max_output_bytes) : max_output_bytes_(max_output_bytes) {}

  std::string RenderBlock(const NodeList& statements, Scope& scope);

 private:
  enum class Control { kNone, kBreak, kContinue };

  std::string RenderFor(const Node& node, Scope& scope);
  void ExecuteSet(const Node& node, Scope& scope);
  void Bind(const Node& target, const Value& value, Scope& scope);
  Value Evaluate(const Node& node, const Scope& scope);
  Value EvaluateMember(const Node& node, const Scope& scope);
  Value EvaluateCall(const Node& node, const Scope& scope);
  Value EvaluateFilter(const Node& node, const Scope& scope);
  void EvaluateArguments(const NodeList& nodes, size_t first, const Scope& scope, ValueList* args,
                         ValueDict* kwargs);

  // Appends `text` to `out`, counting it against max_output_bytes_.
  void Emit(const std::string& text, std::string* out) {
    output_bytes_ += text.size();
    if (output_bytes_ > max_output_bytes_) {
      throw JinjaError(absl::StrCat("rendered text longer than ", max_output_bytes_, " bytes"));
    }
    *out += text;
  }

  size_t max_output_bytes_;
  size_t output_bytes_ = 0;
  size_t loop_iterations_ = 0;
  Control control_ = Control::kNone;
};

std::string Interpreter::RenderBlock(const NodeList& statements, Scope& scope) {
  std::string out;
  for (const NodePtr& statement : statements) {
    if (control_ != Control::kNone) break;
    switch (statement->kind) {
      case NodeKind::kText:
        Emit(statement->text, &out);
        break;
      case NodeKind::kComment:
        break;
      case NodeKind::kIf: {
        const bool test = Evaluate(*statement->children[0], scope).Truthy();
        out += RenderBlock(test ? statement->body : statement->alternate, scope);
        break;
      }
      case NodeKind::kFor:
        out += RenderFor(*statement, scope);
        break;
      case NodeKind::kSet:
        ExecuteSet(*statement, scope);
        break;
      case NodeKind::kBreak:
        control_ = Control::kBreak;
        break;
      case NodeKind::kContinue:
        control_ = Control::kContinue;
        break;
      default:
        Emit(Evaluate(*statement, scope).ToString(), &out);
    }
  }
  return out;
}

void Interpreter::Bind(const Node& target, const Value& value, Scope& scope) {
  if (target.kind == NodeKind::kIdentifier) {
    scope.variables.Set(target.text, value);
    return;
  }
  if (target.kind != NodeKind::kTuple) throw JinjaError("cannot assign to this expression");
  if (!value.is_list()) throw JinjaError("Cannot unpack non-iterable type: " + value.TypeName());
  if (value.list().size() != target.children.size()) {
    throw JinjaError(absl::StrCat(
        "Too ", target.children.size() > value.list().size() ? "few" : "many", " items to unpack"));
  }
  for (size_t i = 0; i < target.children.size(); ++i) {
    if (target.children[i]->kind != NodeKind::kIdentifier) {
      throw JinjaError("Cannot unpack to a non-name");
    }
    scope.variables.Set(target.children[i]->text, value.list()[i]);
  }
}

std::string Interpreter::RenderFor(const Node& node, Scope& scope) {
  Scope loop_scope{{}, &scope};
  const Node& target = *node.children[0];
  const Node* iterable_node = node.children[1].get();
  const Node* condition = nullptr;
  if (iterable_node->kind == NodeKind::kSelect) {
    condition = iterable_node->children[1].get();
    iterable_node = iterable_node->children[0].get();
  }
  Value iterable = Evaluate(*iterable_node, loop_scope);
  if (iterable.kind() == Value::Kind::kDict)
    iterable = GetAttribute(iterable, "keys").function()({}, {});
  if (!iterable.is_list()) {
    throw JinjaError("Expected iterable or object type in for loop: got " + iterable.TypeName());
  }
  ValueList items;
  for (const Value& item : iterable.list()) {
    if (condition != nullptr) {
      Scope test_scope{{}, &loop_scope};
      Bind(target, item, test_scope);
      if (!Evaluate(*condition, test_scope).Truthy()) continue;
    }
    items.push_back(item);
  }
  std::string out;
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    if (++loop_iterations_ > kMaxLoopIterations) {
      throw JinjaError(absl::StrCat("more than ", kMaxLoopIterations, " loop iterations"));
    }
    ValueDict loop;
    loop.Set("index", Value::Int(i + 1));
    loop.Set("index0", Value::Int(i));
    loop.Set("revindex", Value::Int(length - i));
    loop.Set("revindex0", Value::Int(length - i - 1));
    loop.Set("first", Value::Bool(i == 0));
    loop.Set("last", Value::Bool(i == length - 1));
    loop.Set("length", Value::Int(length));
    loop.Set("previtem", i > 0 ? items[i - 1] : Value());
    loop.Set("nextitem", i + 1 < length ? items[i + 1] : Value());
    loop_scope.variables.Set("loop", Value::Dict(std::move(loop)));
    Bind(target, items[i], loop_scope);
    out += RenderBlock(node.body, loop_scope);
    const Control control = std::exchange(control_, Control::kNone);
    if (control == Control::kBreak) break;
  }
  if (items.empty()) out += RenderBlock(node.alternate, loop_scope);
  return out;
}

void Interpreter::ExecuteSet(const Node& node, Scope& scope) {
  const Value value = node.children.size() > 1 ? Evaluate(*node.children[1], scope)
                                               : Value::String(RenderBlock(node.body, scope));
  const Node& target = *node.children[0];
  if (target.kind != NodeKind::kMember) {
    Bind(target, value, scope);
    return;
  }
  const Value object = Evaluate(*target.children[0], scope);
  if (object.kind() != Value::Kind::kNamespace) {
    throw JinjaError("cannot assign attribute on non-namespace object");
  }
  if (Reaches(value, object)) {
    throw JinjaError("cannot store a namespace inside itself (or a value nested over 100 deep)");
  }
  if (target.computed || target.children[1]->kind != NodeKind::kIdentifier) {
    throw JinjaError("Cannot assign to member with non-identifier property");
  }
  object.mutable_dict().Set(target.children[1]->text, value);
}

Value Interpreter::EvaluateMember(const Node& node, const Scope& scope) {
  const Value object = Evaluate(*node.children[0], scope);
  const Node& property = *node.children[1];
  if (property.kind == NodeKind::kSlice) {
    const auto bound = [&](size_t i) {
      return property.children[i] ? Evaluate(*property.children[i], scope) : Value();
    };
    ValueList out;
    if (object.is_list()) {
      for (size_t i : SliceIndices(object.list().size(), bound(0), bound(1), bound(2))) {
        out.push_back(object.list()[i]);
      }
      return Value::List(std::move(out));
    }
    if (!object.is_string()) throw JinjaError("Slice object must be an array or string");
    const std::vector<std::string> chars = SplitCharacters(object.string_value());
    std::string text;
    for (size_t i : SliceIndices(chars.size(), bound(0), bound(1), bound(2))) text += chars[i];
    return Value::String(text);
  }
  Value key;
  if (!node.computed) {
    key = property.kind == NodeKind::kInt ? Value::Int(property.int_value)
                                          : Value::String(property.text);
  } else {
    key = Evaluate(property, scope);
  }
  if (key.kind() == Value::Kind::kInt) return GetIndex(object, key.int_value());
  if (!key.is_string()) {
    throw JinjaError("Cannot access property with non-string: got " + key.TypeName());
  }
  return GetAttribute(object, key.string_value());
}

void Interpreter::EvaluateArguments(const NodeList& nodes, size_t first, const Scope& scope,
                                    ValueList* args, ValueDict* kwargs) {
  for (size_t i = first; i < nodes.size(); ++i) {
    if (nodes[i]->kind == NodeKind::kKeywordArg) {
      kwargs->Set(nodes[i]->text, Evaluate(*nodes[i]->children[0], scope));
    } else {
      args->push_back(Evaluate(*nodes[i], scope));
    }
  }
}

Value Interpreter::EvaluateCall(const Node& node, const Scope& scope) {
  ValueList args;
  ValueDict kwargs;
  EvaluateArguments(node.children, 1, scope, &args, &kwargs);
  const Value callee = Evaluate(*node.children[0], scope);
  if (callee.kind() != Value::Kind::kFunction) {
    throw JinjaError("Cannot call something that is not a function: got " + callee.TypeName());
  }
  return callee.function()(args, kwargs);
}

Value Interpreter::EvaluateFilter(const Node& node, const Scope& scope) {
  const Value operand = Evaluate(*node.children[0], scope);
  const Node& filter = *node.children[1];
  ValueList args;
  ValueDict kwargs;
  if (filter.kind == NodeKind::kIdentifier) return ApplyFilter(filter.text, operand, args, kwargs);
  if (filter.kind != NodeKind::kCall || filter.children[0]->kind != NodeKind::kIdentifier) {
    throw JinjaError("a filter must be a name or a call of a name");
  }
  EvaluateArguments(filter.children, 1, scope, &args, &kwargs);
  return ApplyFilter(filter.children[0]->text, operand, args, kwargs);
}

Value Interpreter::Evaluate(const Node& node, const Scope& scope) {
  switch (node.kind) {
    case NodeKind::kIdentifier:
      return scope.Lookup(node.text);
    case NodeKind::kInt:
      return Value::Int(node.int_value);
    case NodeKind::kFloat:
      return Value::Float(node.float_value);
    case NodeKind::kString:
      return Value::String(node.text);
    case NodeKind::kList:
    case NodeKind::kTuple: {
      ValueList items;
      for (const NodePtr& child : node.children) items.push_back(Evaluate(*child, scope));
      return Value::List(std::move(items));
    }
    case NodeKind::kDict: {
      ValueDict entries;
      for (size_t i = 0; i + 1 < node.children.size(); i += 2) {
        const Value key = Evaluate(*node.children[i], scope);
        if (!key.is_string()) throw JinjaError("dict keys must be strings");
        entries.Set(key.string_value(), Evaluate(*node.children[i + 1], scope));
      }
      return Value::Dict(std::move(entries));
    }
    case NodeKind::kBinary: {
      const Value left = Evaluate(*node.children[0], scope);
      if (node.text == "and") return left.Truthy() ? Evaluate(*node.children[1], scope) : left;
      if (node.text == "or") return left.Truthy() ? left : Evaluate(*node.children[1], scope);
      return ValueBinary(node.text, left, Evaluate(*node.children[1], scope));
    }
    case NodeKind::kUnary: {
      const Value operand = Evaluate(*node.children[0], scope);
      if (node.text == "not") return Value::Bool(!operand.Truthy());
      if (!operand.is_number() && operand.kind() != Value::Kind::kBool) {
        throw JinjaError(
            absl::StrCat("Unknown operator \"", node.text, "\" for ", operand.TypeName()));
      }
      const double value = node.text == "-" ? -operand.number() : operand.number();
      return operand.kind() == Value::Kind::kFloat ? Value::Float(value)
                                                   : Value::Int(static_cast<int64_t>(value));
    }
    case NodeKind::kMember:
      return EvaluateMember(node, scope);
    case NodeKind::kCall:
      return EvaluateCall(node, scope);
    case NodeKind::kFilter:
      return EvaluateFilter(node, scope);
    case NodeKind::kTest:
      return Value::Bool(ApplyTest(node.text, Evaluate(*node.children[0], scope)) != node.negated);
    case NodeKind::kTernary:
      return Evaluate(*node.children[0], scope).Truthy() ? Evaluate(*node.children[1], scope)
                                                         : Evaluate(*node.children[2], scope);
    case NodeKind::kSelect:
      return Evaluate(*node.children[1], scope).Truthy() ? Evaluate(*node.children[0], scope)
                                                         : Value();
    default:
      throw JinjaError("a statement cannot be used as an expression");
  }
}

}  // namespace

std::string RenderProgram(const Program& program, ValueDict variables, size_t max_output_bytes) {
  Scope scope{std::move(variables), nullptr};
  return Interpreter(max_output_bytes).RenderBlock(program.body, scope);
}

}  // namespace tandem::jinja
