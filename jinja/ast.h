// Syntax tree of the Jinja-subset engine: one node type whose `kind` says which fields
// are used (see each enumerator). Built by jinja/parser.h, evaluated by jinja/interpreter.h.
#ifndef TANDEM_JINJA_AST_H_
#define TANDEM_JINJA_AST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tandem::jinja {

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

enum class NodeKind {
  // Statements.
  kText,      // text: the literal template text
  kComment,   // (nothing)
  kIf,        // children: {test}; body; alternate (else / elif branch)
  kFor,       // children: {loop variable (identifier or tuple), iterable}; body; alternate (else)
  kSet,       // children: {target, value} or {target} with body (block set)
  kBreak,     // (nothing)
  kContinue,  // (nothing)
  // Expressions.
  kIdentifier,  // text: name
  kInt,         // int_value
  kFloat,       // float_value
  kString,      // text: value
  kList,        // children: items
  kTuple,       // children: items
  kDict,        // children: key0, value0, key1, value1, ...
  kBinary,      // text: operator (+ - ~ * / // % ** == != < > <= >= and or in "not in")
  kUnary,       // text: operator (not + -); children: {operand}
  kMember,      // children: {object, property}; computed: obj[prop] rather than obj.prop
  kSlice,       // children: {start, stop, step}, each may be null
  kCall,        // children: {callee, arguments...}
  kKeywordArg,  // text: name; children: {value}
  kFilter,      // children: {operand, filter (identifier or call of an identifier)}
  kTest,        // text: test name; children: {operand}; negated: `is not`
  kTernary,     // children: {condition, value if true, value if false}
  kSelect,      // children: {value, condition}: `x if cond` without else (for-loop filter)
};

struct Node {
  NodeKind kind;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  bool computed = false;  // kMember
  bool negated = false;   // kTest
  int depth = 1;          // 1 + the depth of the deepest child (set by the parser)
  NodeList children;
  NodeList body;
  NodeList alternate;
};

// A parsed template: its top-level statements.
struct Program {
  NodeList body;
};

}  // namespace tandem::jinja

#endif  // TANDEM_JINJA_AST_H_
