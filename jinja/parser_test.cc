#include "jinja/parser.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tandem::jinja {
namespace {

// A compact S-expression of a node, to assert the tree's shape.
std::string Show(const Node* node) {
  if (node == nullptr) return "_";
  std::string children;
  for (const NodePtr& child : node->children) children += " " + Show(child.get());
  switch (node->kind) {
    case NodeKind::kIdentifier:
      return node->text;
    case NodeKind::kInt:
      return absl::StrCat(node->int_value);
    case NodeKind::kString:
      return "'" + node->text + "'";
    case NodeKind::kText:
      return "text(" + node->text + ")";
    case NodeKind::kBinary:
    case NodeKind::kUnary:
      return "(" + node->text + children + ")";
    case NodeKind::kMember:
      return std::string(node->computed ? "(index" : "(attr") + children + ")";
    case NodeKind::kSlice:
      return "(slice" + children + ")";
    case NodeKind::kCall:
      return "(call" + children + ")";
    case NodeKind::kKeywordArg:
      return "(" + node->text + "=" + children + ")";
    case NodeKind::kFilter:
      return "(filter" + children + ")";
    case NodeKind::kTest:
      return std::string(node->negated ? "(is-not " : "(is ") + node->text + children + ")";
    case NodeKind::kTernary:
      return "(?" + children + ")";
    case NodeKind::kSelect:
      return "(select" + children + ")";
    case NodeKind::kList:
      return "(list" + children + ")";
    case NodeKind::kTuple:
      return "(tuple" + children + ")";
    case NodeKind::kDict:
      return "(dict" + children + ")";
    default:
      return absl::StrCat("stmt", static_cast<int>(node->kind), children);
  }
}

absl::StatusOr<Program> ParseText(const std::string& source) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(source);
  if (!tokens.ok()) return tokens.status();
  return Parse(*tokens);
}

std::string ShowExpression(const std::string& expression) {
  absl::StatusOr<Program> program = ParseText("{{ " + expression + " }}");
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok() || program->body.size() != 1) return "?";
  return Show(program->body[0].get());
}

TEST(ParserTest, Precedence) {
  EXPECT_EQ(ShowExpression("'a' + m['content'] | trim + 'b'"),
            "(+ (+ 'a' (filter (index m 'content') trim)) 'b')");
  EXPECT_EQ(ShowExpression("messages|length - 1"), "(- (filter messages length) 1)");
  EXPECT_EQ(ShowExpression("not a in b and c or d"), "(or (and (not (in a b)) c) d)");
  EXPECT_EQ(ShowExpression("a == b != (c < d)"), "(!= (== a b) (< c d))");
  EXPECT_EQ(ShowExpression("1 + 2 * 3 ** 2"), "(+ 1 (* 2 (** 3 2)))");
  EXPECT_EQ(ShowExpression("x is not none"), "(is-not none x)");
  EXPECT_EQ(ShowExpression("x if c else y if d else z"), "(? c x (? d y z))");
  EXPECT_EQ(ShowExpression("a not in b"), "(not in a b)");
}

TEST(ParserTest, MembersCallsAndLiterals) {
  EXPECT_EQ(ShowExpression("m.content.split('</think>')[-1].lstrip('\\n')"),
            "(call (attr (index (call (attr (attr m content) split) '</think>') -1) lstrip) '\n')");
  EXPECT_EQ(ShowExpression("messages[1:]"), "(index messages (slice 1 _ _))");
  EXPECT_EQ(ShowExpression("messages[::-1]"), "(index messages (slice _ _ -1))");
  EXPECT_EQ(ShowExpression("namespace(a=1, b=[2, 'x'])"),
            "(call namespace (a= 1) (b= (list 2 'x')))");
  EXPECT_EQ(ShowExpression("x | tojson(indent=4)"), "(filter x (call tojson (indent= 4)))");
  EXPECT_EQ(ShowExpression("{'k': v}"), "(dict 'k' v)");
  EXPECT_EQ(ShowExpression("'a' 'b'"), "'ab'");
}

TEST(ParserTest, Statements) {
  absl::StatusOr<Program> program = ParseText(
      "{% for k, v in d.items() if v %}{{ k }}{% else %}none{% endfor %}"
      "{% set ns.x = 1 %}{% set y %}block{% endset %}"
      "{% if a %}1{% elif b %}2{% else %}3{% endif %}");
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->body.size(), 4u);
  const Node& loop = *program->body[0];
  EXPECT_EQ(loop.kind, NodeKind::kFor);
  EXPECT_EQ(Show(loop.children[0].get()), "(tuple k v)");
  EXPECT_EQ(Show(loop.children[1].get()), "(select (call (attr d items)) v)");
  EXPECT_EQ(loop.alternate.size(), 1u);
  EXPECT_EQ(Show(program->body[1]->children[0].get()), "(attr ns x)");
  EXPECT_EQ(program->body[2]->body.size(), 1u);
  const Node& branch = *program->body[3];
  ASSERT_EQ(branch.alternate.size(), 1u);
  EXPECT_EQ(branch.alternate[0]->kind, NodeKind::kIf);
  EXPECT_EQ(Show(branch.alternate[0]->alternate[0].get()), "text(3)");
}

TEST(ParserTest, ErrorsNameTheProblem) {
  EXPECT_EQ(ParseText("{% macro f() %}{% endmacro %}").status().message(),
            "template syntax error: unsupported statement '{% macro %}'");
  EXPECT_EQ(ParseText("{% if a %}x").status().message(),
            "template syntax error: missing {% endif %}");
  EXPECT_EQ(ParseText("{% for x in y %}").status().message(),
            "template syntax error: missing {% endfor %}");
  EXPECT_FALSE(ParseText("{{ a. }}").ok());
  EXPECT_FALSE(ParseText("{{ f(a=1, 2) }}").ok());
  EXPECT_FALSE(ParseText("{{ }}").ok());
  EXPECT_FALSE(ParseText("{% endif %}").ok());
}

TEST(ParserTest, DeepNestingIsRejectedNotOverflowed) {
  const std::string deep_parens =
      "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(ParseText(deep_parens).status().message().find("nesting deeper than"),
            std::string::npos);
  std::string chain = "{{ a";
  for (int i = 0; i < 5000; ++i) chain += ".b";
  EXPECT_FALSE(ParseText(chain + " }}").ok());
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if a %}";
  EXPECT_FALSE(ParseText(ifs).ok());
  // Within the limit is fine.
  EXPECT_TRUE(ParseText("{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}").ok());
}

}  // namespace
}  // namespace tandem::jinja
