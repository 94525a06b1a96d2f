#include <cstdlib>
#include <utility>

#include "jinja/parser_internal.h"

namespace tandem::jinja::internal {

NodePtr Parser::ParseExpression() {
  DepthGuard guard(&depth_);
  NodePtr value = ParseOr();
  if (!IsName("if")) return value;
  ++pos_;
  NodePtr condition = ParseOr();
  if (!IsName("else")) {
    return MakeNode(NodeKind::kSelect, "", Children(std::move(value), std::move(condition)));
  }
  ++pos_;
  return MakeNode(NodeKind::kTernary, "",
                  Children(std::move(condition), std::move(value), ParseExpression()));
}

NodePtr Parser::ParseOr() {
  NodePtr left = ParseAnd();
  while (IsName("or")) {
    ++pos_;
    left = MakeNode(NodeKind::kBinary, "or", Children(std::move(left), ParseAnd()));
  }
  return left;
}

NodePtr Parser::ParseAnd() {
  NodePtr left = ParseNot();
  while (IsName("and")) {
    ++pos_;
    left = MakeNode(NodeKind::kBinary, "and", Children(std::move(left), ParseNot()));
  }
  return left;
}

NodePtr Parser::ParseNot() {
  if (!IsName("not")) return ParseComparison();
  DepthGuard guard(&depth_);
  ++pos_;
  return MakeNode(NodeKind::kUnary, "not", Children(ParseNot()));
}

NodePtr Parser::ParseComparison() {
  NodePtr left = ParseBinaryLevel(0);
  while (true) {
    std::string op;
    if (IsName("not") && IsName("in", 1)) {
      op = "not in";
      pos_ += 2;
    } else if (IsName("in")) {
      op = "in";
      ++pos_;
    } else if (Is(TokenType::kComparison)) {
      op = tokens_[pos_++].value;
    } else {
      return left;
    }
    left = MakeNode(NodeKind::kBinary, op, Children(std::move(left), ParseBinaryLevel(0)));
  }
}

// Level 0: + - ~; level 1: * / // %; level 2: **; then `is` tests.
NodePtr Parser::ParseBinaryLevel(int level) {
  if (level == 3) return ParseTest();
  static constexpr TokenType kLevelTypes[] = {TokenType::kAdditive, TokenType::kMultiplicative,
                                              TokenType::kPower};
  NodePtr left = ParseBinaryLevel(level + 1);
  while (Is(kLevelTypes[level])) {
    std::string op = tokens_[pos_++].value;
    left = MakeNode(NodeKind::kBinary, op, Children(std::move(left), ParseBinaryLevel(level + 1)));
  }
  return left;
}

NodePtr Parser::ParseTest() {
  NodePtr operand = ParseFilter();
  while (IsName("is")) {
    ++pos_;
    const bool negated = IsName("not");
    if (negated) ++pos_;
    const Token& name = Expect(TokenType::kIdentifier, "a test name after 'is'");
    operand = MakeNode(NodeKind::kTest, name.value, Children(std::move(operand)));
    operand->negated = negated;
  }
  return operand;
}

NodePtr Parser::ParseFilter() {
  NodePtr operand = ParseUnarySign();
  while (Is(TokenType::kPipe)) {
    ++pos_;
    const Token& name = Expect(TokenType::kIdentifier, "a filter name after '|'");
    NodePtr filter = MakeNode(NodeKind::kIdentifier, name.value);
    if (Is(TokenType::kOpenParen)) filter = ParseCall(std::move(filter));
    operand = MakeNode(NodeKind::kFilter, "", Children(std::move(operand), std::move(filter)));
  }
  return operand;
}

NodePtr Parser::ParseUnarySign() {
  if ((Is(TokenType::kUnary) || Is(TokenType::kAdditive)) &&
      (Peek().value == "-" || Peek().value == "+")) {
    DepthGuard guard(&depth_);
    std::string op = tokens_[pos_++].value;
    return MakeNode(NodeKind::kUnary, op, Children(ParseUnarySign()));
  }
  return ParseCallMember();
}

NodePtr Parser::ParseCallMember() {
  NodePtr member = ParseMember(ParsePrimary());
  return Is(TokenType::kOpenParen) ? ParseCall(std::move(member)) : std::move(member);
}

NodePtr Parser::ParseCall(NodePtr callee) {
  DepthGuard guard(&depth_);
  Expect(TokenType::kOpenParen, "(");
  NodePtr call = MakeNode(NodeKind::kCall, "", Children(std::move(callee)));
  bool saw_keyword = false;
  while (!Is(TokenType::kCloseParen)) {
    NodePtr argument = ParseExpression();
    if (Is(TokenType::kEquals)) {
      ++pos_;
      if (argument->kind != NodeKind::kIdentifier) {
        throw JinjaError("expected a name for a keyword argument");
      }
      argument = MakeNode(NodeKind::kKeywordArg, argument->text, Children(ParseExpression()));
      saw_keyword = true;
    } else if (saw_keyword) {
      throw JinjaError("positional arguments must come before keyword arguments");
    }
    call->children.push_back(std::move(argument));
    if (Is(TokenType::kComma)) ++pos_;
  }
  ++pos_;
  NodePtr result = ParseMember(std::move(call));
  return Is(TokenType::kOpenParen) ? ParseCall(std::move(result)) : std::move(result);
}

NodePtr Parser::ParseMember(NodePtr object) {
  while (Is(TokenType::kDot) || Is(TokenType::kOpenBracket)) {
    const bool computed = tokens_[pos_++].type == TokenType::kOpenBracket;
    NodePtr property;
    if (computed) {
      property = ParseSubscript();
      Expect(TokenType::kCloseBracket, "]");
    } else {
      property = ParsePrimary();
      if (property->kind != NodeKind::kIdentifier && property->kind != NodeKind::kInt) {
        throw JinjaError("expected a name or an integer after '.'");
      }
    }
    object = MakeNode(NodeKind::kMember, "", Children(std::move(object), std::move(property)));
    object->computed = computed;
  }
  return object;
}

NodePtr Parser::ParseSubscript() {
  NodeList parts;
  bool slice = false;
  while (!Is(TokenType::kCloseBracket)) {
    if (pos_ >= tokens_.size()) throw JinjaError("missing ]");
    if (Is(TokenType::kColon)) {
      parts.push_back(nullptr);
      ++pos_;
      slice = true;
    } else {
      parts.push_back(ParseExpression());
      if (Is(TokenType::kColon)) {
        ++pos_;
        slice = true;
      }
    }
  }
  if (parts.empty()) throw JinjaError("expected an index or a slice inside []");
  if (!slice) return std::move(parts[0]);
  if (parts.size() > 3) throw JinjaError("a slice has at most 3 parts");
  parts.resize(3);
  return MakeNode(NodeKind::kSlice, "", std::move(parts));
}

NodePtr Parser::ParsePrimary() {
  const Token& token = Peek();
  ++pos_;
  switch (token.type) {
    case TokenType::kNumber: {
      if (token.value.find('.') != std::string::npos) {
        NodePtr node = MakeNode(NodeKind::kFloat);
        node->float_value = std::strtod(token.value.c_str(), nullptr);
        return node;
      }
      NodePtr node = MakeNode(NodeKind::kInt);
      node->int_value = std::strtoll(token.value.c_str(), nullptr, 10);
      return node;
    }
    case TokenType::kString: {
      std::string value = token.value;
      while (Is(TokenType::kString)) value += tokens_[pos_++].value;
      return MakeNode(NodeKind::kString, value);
    }
    case TokenType::kIdentifier:
      return MakeNode(NodeKind::kIdentifier, token.value);
    case TokenType::kOpenParen: {
      NodePtr expression = ParseSequence(false);
      Expect(TokenType::kCloseParen, ")");
      return expression;
    }
    case TokenType::kOpenBracket:
    case TokenType::kOpenBrace: {
      const bool list = token.type == TokenType::kOpenBracket;
      const TokenType close = list ? TokenType::kCloseBracket : TokenType::kCloseBrace;
      NodePtr node = MakeNode(list ? NodeKind::kList : NodeKind::kDict);
      while (!Is(close)) {
        node->children.push_back(ParseExpression());
        if (!list) {
          Expect(TokenType::kColon, ": in a dict literal");
          node->children.push_back(ParseExpression());
        }
        if (Is(TokenType::kComma)) ++pos_;
      }
      ++pos_;
      return node;
    }
    default:
      throw JinjaError(absl::StrCat("unexpected '", token.value, "'"));
  }
}

}  // namespace tandem::jinja::internal
