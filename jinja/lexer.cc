#include "jinja/lexer.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "jinja/js_string.h"
#include "jinja/value.h"

namespace tandem::jinja {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsWord(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c) || c == '_';
}

// Drops one trailing newline, then applies lstrip_blocks (spaces and tabs before a tag
// at the start of a line) and trim_blocks (the newline right after a tag).
std::string Preprocess(absl::string_view source) {
  if (!source.empty() && source.back() == '\n') source.remove_suffix(1);
  std::string stripped;
  for (size_t pos = 0; pos < source.size();) {
    const size_t line_end = std::min(source.find('\n', pos), source.size());
    size_t first = pos;
    while (first < line_end && (source[first] == ' ' || source[first] == '\t')) ++first;
    const bool tag =
        first + 1 < source.size() && source[first] == '{' &&
        (source[first + 1] == '#' || source[first + 1] == '%' || source[first + 1] == '-');
    const size_t keep = tag ? first : pos;
    stripped.append(source.data() + keep, line_end - keep);
    if (line_end < source.size()) stripped += '\n';
    pos = line_end + 1;
  }
  std::string out;
  for (size_t i = 0; i < stripped.size(); ++i) {
    out += stripped[i];
    if (i + 2 < stripped.size() + 0 && stripped[i + 1] == '}' && stripped[i + 2] == '\n' &&
        (stripped[i] == '#' || stripped[i] == '%' || stripped[i] == '-')) {
      out += '}';
      i += 2;
    }
  }
  return out;
}

struct Rule {
  const char* text;
  TokenType type;
};

// Longest-first where one rule is a prefix of another ("**" before "*").
constexpr Rule kRules[] = {
    {"{%", TokenType::kOpenStatement},  {"%}", TokenType::kCloseStatement},
    {"{{", TokenType::kOpenExpression}, {"}}", TokenType::kCloseExpression},
    {"(", TokenType::kOpenParen},       {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenBrace},       {"}", TokenType::kCloseBrace},
    {"[", TokenType::kOpenBracket},     {"]", TokenType::kCloseBracket},
    {",", TokenType::kComma},           {".", TokenType::kDot},
    {":", TokenType::kColon},           {"|", TokenType::kPipe},
    {"<=", TokenType::kComparison},     {">=", TokenType::kComparison},
    {"==", TokenType::kComparison},     {"!=", TokenType::kComparison},
    {"<", TokenType::kComparison},      {">", TokenType::kComparison},
    {"+", TokenType::kAdditive},        {"-", TokenType::kAdditive},
    {"~", TokenType::kAdditive},        {"**", TokenType::kPower},
    {"*", TokenType::kMultiplicative},  {"//", TokenType::kMultiplicative},
    {"/", TokenType::kMultiplicative},  {"%", TokenType::kMultiplicative},
    {"=", TokenType::kEquals},
};

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  std::vector<Token> Run();

 private:
  char At(size_t pos) const { return pos < src_.size() ? src_[pos] : '\0'; }
  bool AfterTag() const {
    return tokens_.empty() || tokens_.back().type == TokenType::kCloseStatement ||
           tokens_.back().type == TokenType::kCloseExpression ||
           tokens_.back().type == TokenType::kComment;
  }
  void StripTrailingWhitespace() {
    if (!tokens_.empty() && tokens_.back().type == TokenType::kText) {
      tokens_.back().value = JsTrimEnd(tokens_.back().value);
      if (tokens_.back().value.empty()) tokens_.pop_back();
    }
  }
  void SkipLeadingWhitespace() {
    while (size_t n = JsSpaceAt(src_, pos_)) pos_ += n;
  }
  std::string ConsumeDigits() {
    const size_t start = pos_;
    while (IsDigit(At(pos_))) ++pos_;
    return src_.substr(start, pos_ - start);
  }
  bool LexText();
  bool LexTagOpenWithDash();
  void LexComment();
  std::string LexString(char quote);
  void LexNumber(std::string sign);

  std::string src_;
  size_t pos_ = 0;
  int brace_depth_ = 0;
  std::vector<Token> tokens_;
};

bool Lexer::LexText() {
  size_t end = pos_;
  while (true) {
    end = src_.find('{', end);
    if (end == std::string::npos) {
      end = src_.size();
      break;
    }
    const char next = At(end + 1);
    if (next == '%' || next == '{' || next == '#') break;
    ++end;
  }
  if (end == pos_) return false;
  tokens_.push_back({TokenType::kText, src_.substr(pos_, end - pos_)});
  pos_ = end;
  return true;
}

void Lexer::LexComment() {
  pos_ += 2;
  const bool strip_before = At(pos_) == '-';
  if (strip_before) ++pos_;
  const size_t end = src_.find("#}", pos_);
  if (end == std::string::npos) throw JinjaError("Missing end of comment tag");
  std::string comment = src_.substr(pos_, end - pos_);
  const bool strip_after = !comment.empty() && comment.back() == '-';
  if (strip_after) comment.pop_back();
  if (strip_before) StripTrailingWhitespace();
  tokens_.push_back({TokenType::kComment, comment});
  pos_ = end + 2;
  if (strip_after) SkipLeadingWhitespace();
}

bool Lexer::LexTagOpenWithDash() {
  if (At(pos_) != '{' || At(pos_ + 2) != '-') return false;
  const char next = At(pos_ + 1);
  if (next != '%' && next != '{') return false;
  StripTrailingWhitespace();
  tokens_.push_back(next == '%' ? Token{TokenType::kOpenStatement, "{%"}
                                : Token{TokenType::kOpenExpression, "{{"});
  if (next == '{') brace_depth_ = 0;
  pos_ += 3;
  return true;
}

std::string Lexer::LexString(char quote) {
  std::string out;
  while (true) {
    if (pos_ >= src_.size()) throw JinjaError("Unexpected end of input in a string literal");
    const char c = src_[pos_++];
    if (c == quote) return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (pos_ >= src_.size()) throw JinjaError("Unexpected end of input in a string literal");
    const char escaped = src_[pos_++];
    switch (escaped) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\'':
      case '"':
      case '\\':
        out += escaped;
        break;
      default:
        throw JinjaError(absl::StrCat("Unexpected escaped character: ", std::string(1, escaped),
                                      " (\\x and \\u escapes are not supported)"));
    }
  }
}

void Lexer::LexNumber(std::string sign) {
  std::string number = sign + ConsumeDigits();
  const bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::kDot;
  if (number.size() > sign.size() && !after_dot && At(pos_) == '.' && IsDigit(At(pos_ + 1))) {
    ++pos_;
    number += "." + ConsumeDigits();
  }
  tokens_.push_back({number.size() > sign.size() ? TokenType::kNumber : TokenType::kUnary, number});
}

std::vector<Token> Lexer::Run() {
  src_ = Preprocess(src_);
  while (pos_ < src_.size()) {
    if (AfterTag() && LexText()) continue;
    if (At(pos_) == '{' && At(pos_ + 1) == '#') {
      LexComment();
      continue;
    }
    if (LexTagOpenWithDash()) continue;
    while (size_t n = JsSpaceAt(src_, pos_)) pos_ += n;  // whitespace inside a tag
    if (pos_ >= src_.size()) throw JinjaError("Unexpected end of input inside a tag");
    const char c = src_[pos_];
    if (c == '-' && At(pos_ + 2) == '}' && (At(pos_ + 1) == '%' || At(pos_ + 1) == '}')) {
      tokens_.push_back(At(pos_ + 1) == '%' ? Token{TokenType::kCloseStatement, "%}"}
                                            : Token{TokenType::kCloseExpression, "}}"});
      pos_ += 3;
      SkipLeadingWhitespace();
      continue;
    }
    if (c == '-' || c == '+') {
      if (tokens_.empty() || tokens_.back().type == TokenType::kText) {
        throw JinjaError(absl::StrCat("Unexpected character: ", std::string(1, c)));
      }
      const TokenType last = tokens_.back().type;
      if (last != TokenType::kIdentifier && last != TokenType::kNumber &&
          last != TokenType::kString && last != TokenType::kCloseParen &&
          last != TokenType::kCloseBracket) {
        ++pos_;
        LexNumber(std::string(1, c));
        continue;
      }
    }
    bool matched = false;
    for (const Rule& rule : kRules) {
      const std::string text = rule.text;
      if (text == "}}" && brace_depth_ > 0) continue;
      if (src_.compare(pos_, text.size(), text) != 0) continue;
      tokens_.push_back({rule.type, text});
      if (rule.type == TokenType::kOpenExpression) brace_depth_ = 0;
      if (rule.type == TokenType::kOpenBrace) ++brace_depth_;
      if (rule.type == TokenType::kCloseBrace) --brace_depth_;
      pos_ += text.size();
      matched = true;
      break;
    }
    if (matched) continue;
    if (c == '\'' || c == '"') {
      ++pos_;
      tokens_.push_back({TokenType::kString, LexString(c)});
    } else if (IsDigit(c)) {
      LexNumber("");
    } else if (IsWord(c)) {
      const size_t start = pos_;
      while (IsWord(At(pos_))) ++pos_;
      tokens_.push_back({TokenType::kIdentifier, src_.substr(start, pos_ - start)});
    } else {
      throw JinjaError(absl::StrCat("Unexpected character: ", std::string(1, c)));
    }
  }
  return std::move(tokens_);
}

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source) {
  try {
    return Lexer(std::string(source)).Run();
  } catch (const JinjaError& error) {
    return absl::InvalidArgumentError(absl::StrCat("template syntax error: ", error.what()));
  }
}

}  // namespace tandem::jinja
