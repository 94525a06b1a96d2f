#include "jinja/parser.h"

#include <algorithm>
#include <utility>

#include "jinja/parser_internal.h"

namespace tandem::jinja {
namespace internal {

NodePtr MakeNode(NodeKind kind, std::string text, NodeList children) {
  auto node = std::make_unique<Node>();
  node->kind = kind;
  node->text = std::move(text);
  node->children = std::move(children);
  for (const NodePtr& child : node->children) {
    if (child) node->depth = std::max(node->depth, child->depth + 1);
  }
  // Chains such as a.b.c... or a+b+c... nest in the tree without nesting in the parser.
  if (node->depth > kMaxNestingDepth) {
    throw JinjaError(absl::StrCat("expression nesting deeper than ", kMaxNestingDepth));
  }
  return node;
}

NodeList Children(NodePtr a, NodePtr b, NodePtr c) {
  NodeList list;
  list.push_back(std::move(a));
  if (b) list.push_back(std::move(b));
  if (c) list.push_back(std::move(c));
  return list;
}

NodePtr Parser::ParseAny() {
  DepthGuard guard(&depth_);
  const Token& token = Peek();
  switch (token.type) {
    case TokenType::kComment:
      ++pos_;
      return MakeNode(NodeKind::kComment);
    case TokenType::kText:
      ++pos_;
      return MakeNode(NodeKind::kText, token.value);
    case TokenType::kOpenStatement:
      return ParseStatement();
    case TokenType::kOpenExpression: {
      ++pos_;
      NodePtr expression = ParseExpression();
      Expect(TokenType::kCloseExpression, "}}");
      return expression;
    }
    default:
      throw JinjaError(absl::StrCat("unexpected '", token.value, "' outside a tag"));
  }
}

NodePtr Parser::ParseStatement() {
  Expect(TokenType::kOpenStatement, "{%");
  const Token& name = Expect(TokenType::kIdentifier, "a statement name");
  if (name.value == "set") return ParseSet();
  if (name.value == "if") {
    NodePtr node = ParseIf();
    ExpectEndTag("endif");
    return node;
  }
  if (name.value == "for") {
    NodePtr node = ParseFor();
    ExpectEndTag("endfor");
    return node;
  }
  if (name.value == "break" || name.value == "continue") {
    Expect(TokenType::kCloseStatement, "%}");
    return MakeNode(name.value == "break" ? NodeKind::kBreak : NodeKind::kContinue);
  }
  throw JinjaError(absl::StrCat("unsupported statement '{% ", name.value, " %}'"));
}

NodePtr Parser::ParseSet() {
  NodePtr target = ParseSequence(false);
  NodePtr node = MakeNode(NodeKind::kSet, "", Children(std::move(target)));
  if (Is(TokenType::kEquals)) {
    ++pos_;
    node->children.push_back(ParseSequence(false));
  } else {
    Expect(TokenType::kCloseStatement, "%} or =");
    node->body = ParseBlock({"endset"});
    Expect(TokenType::kOpenStatement, "{%");
    ExpectName("endset");
  }
  Expect(TokenType::kCloseStatement, "%}");
  return node;
}

NodePtr Parser::ParseIf() {
  NodePtr node = MakeNode(NodeKind::kIf, "", Children(ParseExpression()));
  Expect(TokenType::kCloseStatement, "%}");
  node->body = ParseBlock({"elif", "else", "endif"});
  if (IsStatement({"elif"})) {
    pos_ += 2;
    DepthGuard guard(&depth_);
    node->alternate.push_back(ParseIf());
  } else if (IsStatement({"else"})) {
    pos_ += 2;
    Expect(TokenType::kCloseStatement, "%}");
    node->alternate = ParseBlock({"endif"});
  }
  return node;
}

NodePtr Parser::ParseFor() {
  NodePtr variable = ParseSequence(true);
  if (variable->kind != NodeKind::kIdentifier && variable->kind != NodeKind::kTuple) {
    throw JinjaError("expected a name or a tuple of names as the loop variable");
  }
  ExpectName("in");
  NodePtr node = MakeNode(NodeKind::kFor, "", Children(std::move(variable), ParseExpression()));
  Expect(TokenType::kCloseStatement, "%}");
  node->body = ParseBlock({"endfor", "else"});
  if (IsStatement({"else"})) {
    pos_ += 2;
    Expect(TokenType::kCloseStatement, "%}");
    node->alternate = ParseBlock({"endfor"});
  }
  return node;
}

NodePtr Parser::ParseSequence(bool primary) {
  NodePtr first = primary ? ParsePrimary() : ParseExpression();
  if (!Is(TokenType::kComma)) return first;
  NodePtr tuple = MakeNode(NodeKind::kTuple, "", Children(std::move(first)));
  while (Is(TokenType::kComma)) {
    ++pos_;
    tuple->children.push_back(primary ? ParsePrimary() : ParseExpression());
  }
  return tuple;
}

}  // namespace internal

absl::StatusOr<Program> Parse(const std::vector<Token>& tokens) {
  try {
    return internal::Parser(tokens).Run();
  } catch (const JinjaError& error) {
    return absl::InvalidArgumentError(absl::StrCat("template syntax error: ", error.what()));
  }
}

}  // namespace tandem::jinja
