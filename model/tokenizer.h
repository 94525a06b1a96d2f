// The model's tokenizer, from either file format a model directory may hold: a Hugging
// Face `tokenizer.json` (byte-level BPE as in Llama-3 and Qwen, or the SentencePiece-
// style BPE exported for Llama-2 and Mistral; Hugging Face's exact results) or a
// SentencePiece `tokenizer.model` (SentencePiece's exact results). Also an incremental
// detokenizer for streaming generated text.
#ifndef TANDEM_MODEL_TOKENIZER_H_
#define TANDEM_MODEL_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tandem {

namespace internal {
class TokenizerModel;
}  // namespace internal

// True when `text` is well-formed UTF-8: no overlong forms, no surrogates
// (U+D800..U+DFFF), nothing above U+10FFFF, no truncated sequence.
bool IsValidUtf8(absl::string_view text);

// Immutable after Load; Encode/Decode are thread-safe. Movable, not copyable.
class Tokenizer {
 public:
  // `path` is a model directory or a tokenizer file. A directory's tokenizer.json is
  // used when present (with tokenizer_config.json beside it naming BOS/EOS), else its
  // tokenizer.model: Hugging Face's transformers prefer tokenizer.json the same way. A
  // file is read as tokenizer.json when its name ends in ".json", else as a
  // SentencePiece model. NOT_FOUND when no tokenizer file is there; INVALID_ARGUMENT
  // when the file is malformed or uses what this tokenizer does not implement
  // (supported: BPE models; for SentencePiece with identity normalisation).
  static absl::StatusOr<Tokenizer> Load(const std::string& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text` (which must be valid UTF-8, else INVALID_ARGUMENT), with
  // the BOS id first when `add_bos` (and the model has one).
  absl::StatusOr<std::vector<int>> Encode(absl::string_view text, bool add_bos) const;
  // Text of `ids`; control and special tokens (BOS/EOS, <|eot_id|>) decode to nothing.
  // INVALID_ARGUMENT when an id is outside [0, vocab_size()).
  absl::StatusOr<std::string> Decode(absl::Span<const int> ids) const;

  int vocab_size() const { return vocab_size_; }
  int bos_id() const { return bos_id_; }  // -1 when the model has none.
  // The tokenizer's own EOS (SentencePiece's, or tokenizer_config.json's eos_token);
  // -1 when it has none. Generation stops at the list of
  // LoadGenerationConfig (model/generation_config.h).
  int eos_id() const { return eos_id_; }
  bool IsValidId(int id) const { return id >= 0 && id < vocab_size_; }
  // The piece's text as stored in the model ("▁the", "<0x0A>", "<s>", "Ġthe"); "" for an
  // invalid id.
  std::string IdToPiece(int id) const;
  // The id of the token spelled exactly `piece` (as IdToPiece spells it), or -1.
  int PieceToId(absl::string_view piece) const;
  // For byte-fallback pieces <0xNN>: the byte NN; -1 for every other id.
  int ByteValue(int id) const;
  // Control (SentencePiece) or special (tokenizer.json) token.
  bool IsControl(int id) const;

 private:
  friend class IncrementalDetokenizer;

  // Text of `ids` when some text precedes them (no leading-space stripping).
  absl::StatusOr<std::string> DecodeContinuation(absl::Span<const int> ids) const;
  // INVALID_ARGUMENT unless every id is in [0, vocab_size()).
  absl::Status CheckIds(absl::Span<const int> ids) const;

  // Wraps a loaded model.
  explicit Tokenizer(std::unique_ptr<internal::TokenizerModel> model);

  std::unique_ptr<internal::TokenizerModel> model_;
  int vocab_size_ = 0;
  int bos_id_ = -1;
  int eos_id_ = -1;
};

// Turns a stream of generated token ids into text deltas. The concatenation of all
// deltas returned by Add plus Flush() equals tokenizer.Decode(all ids), and every
// delta is valid UTF-8: bytes of a multi-byte character that arrive in several tokens
// (byte-fallback tokens, or byte-level tokens that end inside a character) are held
// back until the character is complete. Cost per call is proportional to the ids
// added and held back (not to the stream length).
// Not thread-safe; `tokenizer` must outlive it.
class IncrementalDetokenizer {
 public:
  // `after_text`: the ids continue text that precedes them (e.g. generated tokens
  // after a prompt), so a leading "▁" of the first piece decodes as a space instead of
  // being stripped as at the start of a text.
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer, bool after_text = false);

  // Appends `ids` and returns the newly completed text (possibly empty).
  // INVALID_ARGUMENT (state unchanged) when an id is out of range.
  absl::StatusOr<std::string> Add(absl::Span<const int> ids);
  absl::StatusOr<std::string> Add(int id) { return Add(absl::MakeConstSpan(&id, 1)); }
  // Ends the stream: returns the held-back text (an incomplete character decodes to
  // U+FFFD, as Decode does). Afterwards the detokenizer starts a new stream.
  std::string Flush();
  // Forgets everything (a new stream).
  void Reset();

 private:
  // Decodes pending_[0, end) and drops it from pending_ when text was produced.
  std::string Emit(size_t end);

  const Tokenizer* tokenizer_;
  std::vector<int> pending_;  // Ids not yet turned into text.
  bool after_text_ = false;   // Streams continue earlier text.
  bool at_start_ = true;      // No text produced yet in this stream.
};

}  // namespace tandem

#endif  // TANDEM_MODEL_TOKENIZER_H_
