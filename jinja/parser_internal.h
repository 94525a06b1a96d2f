// Internal to //jinja:parser: the recursive-descent parser shared by parser.cc
// (statements) and parser_expressions.cc (expressions).
#ifndef TANDEM_JINJA_PARSER_INTERNAL_H_
#define TANDEM_JINJA_PARSER_INTERNAL_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jinja/ast.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/value.h"

namespace tandem::jinja::internal {

// A node of `kind` with `text` and `children`; throws JinjaError when the tree gets
// deeper than kMaxNestingDepth.
NodePtr MakeNode(NodeKind kind, std::string text = "", NodeList children = {});
// The non-null nodes among a, b, c, in order.
NodeList Children(NodePtr a, NodePtr b = nullptr, NodePtr c = nullptr);

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  Program Run() {
    Program program;
    while (pos_ < tokens_.size()) program.body.push_back(ParseAny());
    return program;
  }

 private:
  // Counts nesting while in scope; throws past kMaxNestingDepth.
  class DepthGuard {
   public:
    explicit DepthGuard(int* depth) : depth_(depth) {
      if (++*depth_ > kMaxNestingDepth) {
        throw JinjaError(absl::StrCat("template nesting deeper than ", kMaxNestingDepth));
      }
    }
    ~DepthGuard() { --*depth_; }

   private:
    int* depth_;
  };

  const Token& Peek(size_t ahead = 0) const {
    if (pos_ + ahead >= tokens_.size()) throw JinjaError("Unexpected end of template");
    return tokens_[pos_ + ahead];
  }
  bool Is(TokenType type, size_t ahead = 0) const {
    return pos_ + ahead < tokens_.size() && tokens_[pos_ + ahead].type == type;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Is(TokenType::kIdentifier, ahead) && tokens_[pos_ + ahead].value == name;
  }
  bool IsStatement(std::initializer_list<const char*> names) const {
    if (!Is(TokenType::kOpenStatement)) return false;
    for (const char* name : names) {
      if (IsName(name, 1)) return true;
    }
    return false;
  }
  const Token& Expect(TokenType type, const char* what) {
    if (!Is(type)) {
      throw JinjaError(absl::StrCat("expected ", what,
                                    pos_ < tokens_.size() ? " before '" + tokens_[pos_].value + "'"
                                                          : " at the end of the template"));
    }
    return tokens_[pos_++];
  }
  void ExpectName(const char* name) {
    if (!IsName(name)) throw JinjaError(absl::StrCat("expected '", name, "'"));
    ++pos_;
  }
  void ExpectEndTag(const char* name) {
    Expect(TokenType::kOpenStatement, "{%");
    ExpectName(name);
    Expect(TokenType::kCloseStatement, "%}");
  }
  // Statements up to (not including) a {% name %} tag of one of `names`.
  NodeList ParseBlock(std::initializer_list<const char*> names) {
    NodeList block;
    while (!IsStatement(names)) {
      if (pos_ >= tokens_.size()) {
        for (const char* name : names) {
          if (absl::string_view(name).substr(0, 3) == "end") {
            throw JinjaError(absl::StrCat("missing {% ", name, " %}"));
          }
        }
      }
      block.push_back(ParseAny());
    }
    return block;
  }

  NodePtr ParseAny();
  NodePtr ParseStatement();
  NodePtr ParseSet();
  NodePtr ParseIf();
  NodePtr ParseFor();
  NodePtr ParseSequence(bool primary);
  NodePtr ParseExpression();
  NodePtr ParseOr();
  NodePtr ParseAnd();
  NodePtr ParseNot();
  NodePtr ParseComparison();
  NodePtr ParseBinaryLevel(int level);
  NodePtr ParseTest();
  NodePtr ParseFilter();
  NodePtr ParseUnarySign();
  NodePtr ParseCallMember();
  NodePtr ParseCall(NodePtr callee);
  NodePtr ParseMember(NodePtr object);
  NodePtr ParseSubscript();
  NodePtr ParsePrimary();

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace tandem::jinja::internal

#endif  // TANDEM_JINJA_PARSER_INTERNAL_H_
