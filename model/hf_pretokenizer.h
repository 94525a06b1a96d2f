// The text rules that a Hugging Face tokenizer.json applies before its model: the
// "normalizer" and the "pre_tokenizer" (with GPT-2's byte-level alphabet). Regexes use
// ICU, so \p{L}, \p{N}, (?i:...) and look-ahead work as in Hugging Face's Oniguruma
// patterns. Internal to the tokenizer library.
#ifndef TANDEM_MODEL_HF_PRETOKENIZER_H_
#define TANDEM_MODEL_HF_PRETOKENIZER_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {
namespace internal {

// tokenizer.json fields: the string / boolean field `key` of `spec`, or `fallback` when
// it is absent, null or of another type.
inline std::string JsonString(const nlohmann::json& spec, const char* key,
                              const std::string& fallback = "") {
  const auto it = spec.find(key);
  return it != spec.end() && it->is_string() ? it->get<std::string>() : fallback;
}
inline bool JsonBool(const nlohmann::json& spec, const char* key, bool fallback) {
  const auto it = spec.find(key);
  return it != spec.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// A tokenizer.json "normalizer": null, NFC, NFKC, Prepend, Replace (String pattern) or
// a Sequence of these. Immutable after Parse; thread-safe.
class HfNormalizer {
 public:
  // INVALID_ARGUMENT naming `source` for any other type or a malformed entry.
  static absl::StatusOr<HfNormalizer> Parse(const nlohmann::json& spec, const std::string& source);
  // `text` (well-formed UTF-8) normalized.
  std::string Apply(absl::string_view text) const;

 private:
  struct Step {
    enum class Kind { kNfc, kNfkc, kPrepend, kReplace } kind;
    std::string pattern;  // Replace: the text replaced.
    std::string content;  // Prepend / Replace: the text inserted.
  };
  // Appends the steps of `spec` (recursing into Sequences).
  absl::Status AddSteps(const nlohmann::json& spec, const std::string& source);
  std::vector<Step> steps_;
};

// A tokenizer.json "pre_tokenizer": null, Split (Regex or String pattern, behavior
// Isolated or Removed, not inverted), ByteLevel (add_prefix_space, use_regex with
// GPT-2's pattern), Metaspace (replacement, prepend_scheme, split) or a Sequence of
// these. Immutable after Parse; thread-safe.
class HfPreTokenizer {
 public:
  // INVALID_ARGUMENT naming `source` for any other type, a malformed entry or a regex
  // that does not compile.
  static absl::StatusOr<HfPreTokenizer> Parse(const nlohmann::json& spec,
                                              const std::string& source);
  HfPreTokenizer();  // No steps: the text is one word.
  HfPreTokenizer(HfPreTokenizer&&) noexcept;
  HfPreTokenizer& operator=(HfPreTokenizer&&) noexcept;
  ~HfPreTokenizer();

  // The words of `text` (normalized, well-formed UTF-8), in order, none empty. After a
  // ByteLevel step every byte is spelled with its byte-level character.
  // `first_segment`: `text` starts the input (not text after an added token), which
  // Metaspace's prepend_scheme "first" needs.
  std::vector<std::string> Split(absl::string_view text, bool first_segment) const;

 private:
  struct Step;
  absl::Status AddSteps(const nlohmann::json& spec, const std::string& source);
  std::vector<Step> steps_;
};

// GPT-2's byte-level alphabet: the UTF-8 spelling of the character that stands for
// `byte` (printable bytes stand for themselves; the others map to U+0100 and up).
const std::string& ByteLevelCharacter(unsigned char byte);
// The byte that `code_point` stands for in that alphabet, or -1.
int ByteLevelByte(char32_t code_point);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_MODEL_HF_PRETOKENIZER_H_
