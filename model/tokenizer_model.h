// The interface behind Tokenizer: one tokenizer file format's encoding and decoding
// (SentencePiece tokenizer.model, Hugging Face tokenizer.json). Internal to the
// tokenizer library; callers use Tokenizer.
#ifndef TANDEM_MODEL_TOKENIZER_MODEL_H_
#define TANDEM_MODEL_TOKENIZER_MODEL_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tandem {
namespace internal {

// Immutable after loading; every method is thread-safe. Ids passed in are in
// [0, vocab_size()) (Tokenizer checks them).
class TokenizerModel {
 public:
  virtual ~TokenizerModel() = default;

  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;  // -1 when none.
  virtual int eos_id() const = 0;  // -1 when none.

  // Ids of `text` (well-formed UTF-8), without BOS.
  virtual std::vector<int> Encode(absl::string_view text) const = 0;
  // Text of `ids` (well-formed UTF-8); control/special tokens decode to nothing.
  // `at_text_start`: the ids begin a text (the format's leading-space rule applies).
  virtual std::string Decode(absl::Span<const int> ids, bool at_text_start) const = 0;
  // The bytes `id` contributes to decoded text in the middle of a text, before
  // ill-formed UTF-8 is replaced (a byte token: its one byte).
  virtual std::string RawBytes(int id) const = 0;

  // The token's text as stored in the file; "" for an id with no token.
  virtual std::string Piece(int id) const = 0;
  // The id of the token spelled `piece` exactly, or -1.
  virtual int PieceToId(absl::string_view piece) const = 0;
  // Byte-fallback token <0xNN>: NN; -1 for every other id.
  virtual int ByteValue(int id) const = 0;
  // Control (SentencePiece) or special (tokenizer.json) tokens.
  virtual bool IsControl(int id) const = 0;
};

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_MODEL_TOKENIZER_MODEL_H_
