#include "model/hf_pretokenizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/utext.h>

#include <array>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tandem {
namespace internal {
namespace {

using nlohmann::json;

// GPT-2's pre-tokenizer pattern (ByteLevel with use_regex).
constexpr absl::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr absl::string_view kMetaspace = "\xE2\x96\x81";  // U+2581

absl::Status Invalid(const std::string& source, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

// A Hugging Face (Oniguruma) pattern for ICU: \s and \S become White_Space, which is
// what Oniguruma means by them (ICU's \s leaves out U+000B and U+0085).
std::string ToIcuPattern(absl::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += "\\p{White_Space}";
      } else if (next == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += '\\';
        out += next;
      }
    } else {
      out += pattern[i];
    }
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const icu::RegexPattern>> CompileRegex(absl::string_view pattern,
                                                                      const std::string& source) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError error;
  const std::string icu_pattern = ToIcuPattern(pattern);
  std::shared_ptr<const icu::RegexPattern> compiled(
      icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(icu_pattern), 0, error, status));
  if (U_FAILURE(status) || compiled == nullptr) {
    return Invalid(source, absl::StrCat("pre_tokenizer regex \"", pattern,
                                        "\" does not compile: ", u_errorName(status)));
  }
  return compiled;
}

// Byte ranges [begin, end) of the matches of `regex` in `text`, in order.
std::vector<std::pair<size_t, size_t>> FindAll(const icu::RegexPattern& regex,
                                               absl::string_view text) {
  std::vector<std::pair<size_t, size_t>> matches;
  UErrorCode status = U_ZERO_ERROR;
  UText* utext = utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status);
  std::unique_ptr<icu::RegexMatcher> matcher(regex.matcher(status));
  if (U_FAILURE(status) || matcher == nullptr) {
    utext_close(utext);
    return matches;
  }
  matcher->reset(utext);
  while (matcher->find(status) && U_SUCCESS(status)) {
    const int64_t begin = matcher->start64(status);
    const int64_t end = matcher->end64(status);
    if (end > begin) matches.emplace_back(begin, end);
  }
  matcher.reset();
  utext_close(utext);
  return matches;
}

// The string of a tokenizer.json pattern {"String": s} or {"Regex": r}.
struct Pattern {
  bool is_regex = false;
  std::string text;
};
absl::StatusOr<Pattern> ParsePattern(const json& spec, const std::string& source,
                                     const std::string& where) {
  const auto it = spec.find("pattern");
  if (it == spec.end() || !it->is_object()) return Invalid(source, where + " has no pattern");
  if (it->contains("String") && (*it)["String"].is_string()) {
    return Pattern{false, (*it)["String"].get<std::string>()};
  }
  if (it->contains("Regex") && (*it)["Regex"].is_string()) {
    return Pattern{true, (*it)["Regex"].get<std::string>()};
  }
  return Invalid(source, where + " pattern is neither {\"String\": ...} nor {\"Regex\": ...}");
}

}  // namespace

// --- Normalizer ---------------------------------------------------------------

absl::StatusOr<HfNormalizer> HfNormalizer::Parse(const json& spec, const std::string& source) {
  HfNormalizer normalizer;
  if (absl::Status status = normalizer.AddSteps(spec, source); !status.ok()) return status;
  return normalizer;
}

absl::Status HfNormalizer::AddSteps(const json& spec, const std::string& source) {
  if (spec.is_null()) return absl::OkStatus();
  const std::string type = spec.is_object() ? JsonString(spec, "type") : "";
  if (type == "Sequence" && spec.contains("normalizers") && spec["normalizers"].is_array()) {
    for (const json& step : spec["normalizers"]) {
      if (absl::Status status = AddSteps(step, source); !status.ok()) return status;
    }
  } else if (type == "NFC" || type == "NFKC") {
    steps_.push_back({type == "NFC" ? Step::Kind::kNfc : Step::Kind::kNfkc, "", ""});
  } else if (type == "Prepend" && spec.contains("prepend") && spec["prepend"].is_string()) {
    steps_.push_back({Step::Kind::kPrepend, "", spec["prepend"].get<std::string>()});
  } else if (type == "Replace") {
    absl::StatusOr<Pattern> pattern = ParsePattern(spec, source, "normalizer Replace");
    if (!pattern.ok()) return pattern.status();
    if (pattern->is_regex || pattern->text.empty()) {
      return Invalid(source, "normalizer Replace: only a non-empty String pattern is supported");
    }
    steps_.push_back({Step::Kind::kReplace, pattern->text, JsonString(spec, "content")});
  } else {
    return Invalid(source, absl::StrCat("normalizer \"", type.empty() ? spec.dump() : type,
                                        "\" is not supported (supported: NFC, NFKC, Prepend, "
                                        "Replace, Sequence)"));
  }
  return absl::OkStatus();
}

std::string HfNormalizer::Apply(absl::string_view text) const {
  std::string out(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kNfc:
      case Step::Kind::kNfkc: {
        UErrorCode status = U_ZERO_ERROR;
        const icu::Normalizer2* form = step.kind == Step::Kind::kNfc
                                           ? icu::Normalizer2::getNFCInstance(status)
                                           : icu::Normalizer2::getNFKCInstance(status);
        std::string normalized;
        icu::StringByteSink<std::string> sink(&normalized);
        if (U_SUCCESS(status)) {
          form->normalizeUTF8(0, icu::StringPiece(out.data(), static_cast<int32_t>(out.size())),
                              sink, nullptr, status);
        }
        if (U_SUCCESS(status)) out = std::move(normalized);
        break;
      }
      case Step::Kind::kPrepend:
        if (!out.empty()) out.insert(0, step.content);
        break;
      case Step::Kind::kReplace:
        out = absl::StrReplaceAll(out, {{step.pattern, step.content}});
        break;
    }
  }
  return out;
}

// --- Pre-tokenizer ---------------------------------------------------------------

struct HfPreTokenizer::Step {
  enum class Kind { kSplit, kByteLevel, kMetaspace } kind;
  std::shared_ptr<const icu::RegexPattern> regex;  // Split (also a String, quoted) / ByteLevel.
  bool remove_matches = false;                     // Split: behavior Removed.
  bool add_prefix_space = false;                   // ByteLevel.
  std::string replacement;                         // Metaspace.
  std::string prepend_scheme;                      // Metaspace: always, first or never.
  bool split_words = false;                        // Metaspace: split before each replacement.
};

HfPreTokenizer::HfPreTokenizer() = default;
HfPreTokenizer::HfPreTokenizer(HfPreTokenizer&&) noexcept = default;
HfPreTokenizer& HfPreTokenizer::operator=(HfPreTokenizer&&) noexcept = default;
HfPreTokenizer::~HfPreTokenizer() = default;

absl::StatusOr<HfPreTokenizer> HfPreTokenizer::Parse(const json& spec, const std::string& source) {
  HfPreTokenizer pre_tokenizer;
  if (absl::Status status = pre_tokenizer.AddSteps(spec, source); !status.ok()) return status;
  return pre_tokenizer;
}

absl::Status HfPreTokenizer::AddSteps(const json& spec, const std::string& source) {
  if (spec.is_null()) return absl::OkStatus();
  const std::string type = spec.is_object() ? JsonString(spec, "type") : "";
  if (type == "Sequence" && spec.contains("pretokenizers") && spec["pretokenizers"].is_array()) {
    for (const json& step : spec["pretokenizers"]) {
      if (absl::Status status = AddSteps(step, source); !status.ok()) return status;
    }
    return absl::OkStatus();
  }
  Step step;
  if (type == "Split") {
    absl::StatusOr<Pattern> pattern = ParsePattern(spec, source, "pre_tokenizer Split");
    if (!pattern.ok()) return pattern.status();
    const std::string behavior = JsonString(spec, "behavior");
    if ((behavior != "Isolated" && behavior != "Removed") || JsonBool(spec, "invert", false)) {
      return Invalid(source, absl::StrCat("pre_tokenizer Split behavior \"", behavior,
                                          "\" (or invert) is not supported (supported: Isolated, "
                                          "Removed, not inverted)"));
    }
    const std::string regex =
        pattern->is_regex ? pattern->text : absl::StrCat("\\Q", pattern->text, "\\E");
    absl::StatusOr<std::shared_ptr<const icu::RegexPattern>> compiled = CompileRegex(regex, source);
    if (!compiled.ok()) return compiled.status();
    step.kind = Step::Kind::kSplit;
    step.regex = *std::move(compiled);
    step.remove_matches = behavior == "Removed";
  } else if (type == "ByteLevel") {
    step.kind = Step::Kind::kByteLevel;
    step.add_prefix_space = JsonBool(spec, "add_prefix_space", true);
    if (JsonBool(spec, "use_regex", true)) {
      absl::StatusOr<std::shared_ptr<const icu::RegexPattern>> compiled =
          CompileRegex(kGpt2Pattern, source);
      if (!compiled.ok()) return compiled.status();
      step.regex = *std::move(compiled);
    }
  } else if (type == "Metaspace") {
    step.kind = Step::Kind::kMetaspace;
    step.replacement = JsonString(spec, "replacement", std::string(kMetaspace));
    const bool legacy_prefix = JsonBool(spec, "add_prefix_space", true);
    step.prepend_scheme = JsonString(spec, "prepend_scheme", legacy_prefix ? "always" : "never");
    step.split_words = JsonBool(spec, "split", true);
    if (step.prepend_scheme != "always" && step.prepend_scheme != "first" &&
        step.prepend_scheme != "never") {
      return Invalid(source, "pre_tokenizer Metaspace prepend_scheme \"" + step.prepend_scheme +
                                 "\" is not always, first or never");
    }
  } else {
    return Invalid(source, absl::StrCat("pre_tokenizer \"", type.empty() ? spec.dump() : type,
                                        "\" is not supported (supported: Split, ByteLevel, "
                                        "Metaspace, Sequence)"));
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

namespace {

// Appends the pieces of `word` split at `regex`'s matches: matches and the text between
// them are pieces of their own (Isolated), or the matches are dropped (Removed).
void SplitAtMatches(const icu::RegexPattern& regex, bool remove_matches, const std::string& word,
                    std::vector<std::string>* out) {
  size_t previous_end = 0;
  for (const auto& [begin, end] : FindAll(regex, word)) {
    if (begin > previous_end) out->push_back(word.substr(previous_end, begin - previous_end));
    if (!remove_matches) out->push_back(word.substr(begin, end - begin));
    previous_end = end;
  }
  if (previous_end < word.size()) out->push_back(word.substr(previous_end));
}

// Metaspace: spaces become `replacement`, which (per scheme) also starts the text; with
// `split_words` a new word starts at each replacement.
void SplitMetaspace(const std::string& word, const std::string& replacement, bool prepend,
                    bool split_words, std::vector<std::string>* out) {
  std::string replaced = absl::StrReplaceAll(word, {{" ", replacement}});
  if (prepend && replaced.compare(0, replacement.size(), replacement) != 0) {
    replaced.insert(0, replacement.data(), replacement.size());
  }
  if (!split_words) {
    out->push_back(std::move(replaced));
    return;
  }
  size_t start = 0;
  for (size_t at = replaced.find(replacement, 1); at != std::string::npos;
       at = replaced.find(replacement, at + replacement.size())) {
    if (at > start) out->push_back(replaced.substr(start, at - start));
    start = at;
  }
  if (start < replaced.size()) out->push_back(replaced.substr(start));
}

}  // namespace

std::vector<std::string> HfPreTokenizer::Split(absl::string_view text, bool first_segment) const {
  std::vector<std::string> words;
  if (!text.empty()) words.emplace_back(text);
  for (const Step& step : steps_) {
    std::vector<std::string> next;
    for (std::string& word : words) {
      switch (step.kind) {
        case Step::Kind::kSplit:
          SplitAtMatches(*step.regex, step.remove_matches, word, &next);
          break;
        case Step::Kind::kByteLevel: {
          if (step.add_prefix_space && word[0] != ' ') word.insert(0, " ");
          std::vector<std::string> pieces;
          if (step.regex != nullptr) {
            SplitAtMatches(*step.regex, false, word, &pieces);
          } else {
            pieces.push_back(std::move(word));
          }
          for (const std::string& piece : pieces) {
            std::string mapped;
            for (const char byte : piece) mapped += ByteLevelCharacter(byte);
            next.push_back(std::move(mapped));
          }
          break;
        }
        case Step::Kind::kMetaspace: {
          const bool prepend = step.prepend_scheme == "always" ||
                               (step.prepend_scheme == "first" && first_segment && next.empty());
          SplitMetaspace(word, step.replacement, prepend, step.split_words, &next);
          break;
        }
      }
    }
    words = std::move(next);
  }
  return words;
}

// --- Byte-level alphabet ------------------------------------------------------------

namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68
// bytes, in order, to U+0100, U+0101, ...
std::array<char32_t, 256> ByteLevelCodePoints() {
  std::array<char32_t, 256> code_points{};
  char32_t next_extra = 0x100;
  for (int byte = 0; byte < 256; ++byte) {
    const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                           (byte >= 0xAE && byte <= 0xFF);
    code_points[byte] = printable ? static_cast<char32_t>(byte) : next_extra++;
  }
  return code_points;
}

std::string EncodeUtf8(char32_t code_point) {
  std::string out;
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
  return out;
}

}  // namespace

const std::string& ByteLevelCharacter(unsigned char byte) {
  static const std::array<std::string, 256>* const characters = [] {
    auto* table = new std::array<std::string, 256>;
    const std::array<char32_t, 256> code_points = ByteLevelCodePoints();
    for (int byte = 0; byte < 256; ++byte) (*table)[byte] = EncodeUtf8(code_points[byte]);
    return table;
  }();
  return (*characters)[byte];
}

int ByteLevelByte(char32_t code_point) {
  static const std::array<int16_t, 0x200>* const bytes = [] {
    auto* table = new std::array<int16_t, 0x200>;
    table->fill(-1);
    const std::array<char32_t, 256> code_points = ByteLevelCodePoints();
    for (int byte = 0; byte < 256; ++byte) (*table)[code_points[byte]] = static_cast<int16_t>(byte);
    return table;
  }();
  return code_point < bytes->size() ? (*bytes)[code_point] : -1;
}

}  // namespace internal
}  // namespace tandem
