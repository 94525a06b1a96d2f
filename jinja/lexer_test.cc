#include "jinja/lexer.h"

#include "gtest/gtest.h"

namespace tandem::jinja {
namespace {

std::vector<Token> Lex(const std::string& source) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(source);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  return tokens.ok() ? *tokens : std::vector<Token>{};
}

std::string Describe(const std::vector<Token>& tokens) {
  std::string out;
  for (const Token& token : tokens) out += "[" + token.value + "]";
  return out;
}

TEST(LexerTest, TagsAndExpressions) {
  const std::vector<Token> tokens = Lex("a{{ x.y[0] + 'q\\n' }}b{% if n >= -1 %}");
  EXPECT_EQ(Describe(tokens), "[a][{{][x][.][y][[][0][]][+][q\n][}}][b][{%][if][n][>=][-1][%}]");
  EXPECT_EQ(tokens[0].type, TokenType::kText);
  EXPECT_EQ(tokens[8].type, TokenType::kAdditive);
  EXPECT_EQ(tokens[9].type, TokenType::kString);
  EXPECT_EQ(tokens[16].type, TokenType::kNumber);
}

TEST(LexerTest, BinaryAndUnaryMinus) {
  EXPECT_EQ(Describe(Lex("{{ a - 1 }}")), "[{{][a][-][1][}}]");
  EXPECT_EQ(Describe(Lex("{{ m[::-1] }}")), "[{{][m][[][:][:][-1][]][}}]");
  EXPECT_EQ(Describe(Lex("{{ -x }}")), "[{{][-][x][}}]");
  EXPECT_EQ(Describe(Lex("{{ 2 ** 3 // 1.5 }}")), "[{{][2][**][3][//][1.5][}}]");
}

TEST(LexerTest, WhitespaceControl) {
  EXPECT_EQ(Describe(Lex("a  \n {%- x -%}  \n b")), "[a][{%][x][%}][b]");
  EXPECT_EQ(Describe(Lex("a {{- x -}} b")), "[a][{{][x][}}][b]");
  EXPECT_EQ(Describe(Lex("a {#- note -#} b")), "[a][ note ][b]");
}

TEST(LexerTest, TrimAndLstripBlocksAndTrailingNewline) {
  // lstrip_blocks: indentation before a block tag goes; trim_blocks: so does the
  // newline after it; one trailing newline of the template is dropped.
  EXPECT_EQ(Describe(Lex("x\n  {% if a %}\n  y\n  {{ z }}\n")),
            "[x\n][{%][if][a][%}][  y\n  ][{{][z][}}]");
}

TEST(LexerTest, Errors) {
  EXPECT_EQ(Tokenize("{{ 'open }}").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenize("{# never closed").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenize("{{ a ? b }}").status().message(),
            "template syntax error: Unexpected character: ?");
  EXPECT_EQ(Tokenize("{{ '\\q' }}").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenize("{{ a ").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::jinja
