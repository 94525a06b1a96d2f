// A Hugging Face tokenizer.json "decoder": how token strings become text. Internal to
// the tokenizer library.
#ifndef TANDEM_MODEL_HF_DECODER_H_
#define TANDEM_MODEL_HF_DECODER_H_

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tandem {
namespace internal {

// Supported: null (tokens concatenated), ByteLevel (GPT-2's byte alphabet back to
// bytes), and the SentencePiece-style Sequence of Replace (String patterns),
// ByteFallback (<0xNN> tokens are bytes), Fuse, Strip (at the start) and Metaspace.
// Ill-formed UTF-8 is replaced per maximal subpart (one U+FFFD each), as the WHATWG
// decoder does, for byte-level and byte-fallback bytes alike; so does the reference
// (@lenml/tokenizers). Hugging Face's Rust ByteFallback instead turns every byte of an
// ill-formed run into U+FFFD, well-formed characters in it included; that rule would
// make streamed text differ from decoded text unless every run of byte tokens were held
// back until it ends. Immutable after Parse; thread-safe.
class HfDecoder {
 public:
  // INVALID_ARGUMENT naming `source` for any other decoder.
  static absl::StatusOr<HfDecoder> Parse(const nlohmann::json& spec, const std::string& source);

  // Text of `tokens` (token strings, special tokens already left out). `at_text_start`:
  // they begin a text, so Strip / Metaspace remove the leading space.
  std::string Decode(absl::Span<const absl::string_view> tokens, bool at_text_start) const;
  // The bytes `token` contributes in the middle of a text, before ill-formed UTF-8 is
  // replaced (a byte token: its one byte).
  std::string RawBytes(absl::string_view token) const;
  // <0xNN> tokens decode to the byte NN.
  bool byte_fallback() const { return byte_fallback_; }

 private:
  absl::Status AddSteps(const nlohmann::json& spec, const std::string& source);
  // The byte of a <0xNN> token when byte fallback is on; -1 otherwise.
  int FallbackByte(absl::string_view token) const;

  bool byte_level_ = false;
  bool byte_fallback_ = false;
  std::vector<std::pair<std::string, std::string>> replacements_;  // Pattern, content.
  std::string strip_content_;  // Up to strip_count_ of it leave the text's start.
  int strip_count_ = 0;
};

// The byte NN of a "<0xNN>" token string; -1 for any other string.
int ParseByteToken(absl::string_view token);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_MODEL_HF_DECODER_H_
