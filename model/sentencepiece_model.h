// A SentencePiece BPE model (the `tokenizer.model` file format) read into memory:
// the vocabulary with each piece's score and type, the special ids and the
// text-normalisation settings. Internal to the tokenizer library.
#ifndef TANDEM_MODEL_SENTENCEPIECE_MODEL_H_
#define TANDEM_MODEL_SENTENCEPIECE_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {
namespace internal {

// The type of a vocabulary piece (values as in the file format).
enum class PieceType : uint8_t {
  kNormal = 1,
  kUnknown = 2,      // The unknown token (exactly one per model).
  kControl = 3,      // <s>, </s>, ...: never produced by encoding text, decode to "".
  kUserDefined = 4,  // Always kept whole when it occurs in the text.
  kUnused = 5,       // Never emitted: re-split into the pieces it was merged from.
  kByte = 6,         // <0xNN>: one byte of a character outside the vocabulary.
};

// Immutable after Parse; all methods are thread-safe.
class SentencePieceModel {
 public:
  // Parses a serialized model and checks that it is well formed and supported:
  // model type BPE, identity normalisation (an empty precompiled charsmap), no
  // denormaliser, spaces as prefixes. INVALID_ARGUMENT naming `source` (the file)
  // and the problem otherwise.
  static absl::StatusOr<std::unique_ptr<SentencePieceModel>> Parse(absl::string_view serialized,
                                                                   absl::string_view source);

  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  // Requires 0 <= id < vocab_size().
  const std::string& piece(int id) const { return pieces_[id].text; }
  float score(int id) const { return pieces_[id].score; }
  PieceType type(int id) const { return pieces_[id].type; }
  // The byte NN of a <0xNN> piece, else -1.
  int byte_value(int id) const { return pieces_[id].byte; }

  int unk_id() const { return unk_id_; }
  int bos_id() const { return bos_id_; }  // -1 when the model has none.
  int eos_id() const { return eos_id_; }  // -1 when the model has none.
  // Id of the <0xNN> piece for `byte`; -1 without byte fallback.
  int byte_id(uint8_t byte) const { return byte_fallback_ ? byte_ids_[byte] : -1; }
  bool byte_fallback() const { return byte_fallback_; }
  const std::string& unk_surface() const { return unk_surface_; }

  bool add_dummy_prefix() const { return add_dummy_prefix_; }
  bool remove_extra_whitespaces() const { return remove_extra_whitespaces_; }
  bool escape_whitespaces() const { return escape_whitespaces_; }

  // Id of `text` among the pieces that encoding can produce by merging (normal,
  // user-defined and unused ones), or -1.
  int FindMergeable(absl::string_view text) const;
  // Id of the piece spelled `text` (control, unknown and byte pieces first, then
  // the mergeable ones), or unk_id() when there is none.
  int PieceToId(absl::string_view text) const;
  // Length in bytes of the longest user-defined piece that `text` starts with; 0
  // when there is none.
  size_t MatchUserDefined(absl::string_view text) const;

 private:
  struct Piece {
    std::string text;
    float score = 0;
    PieceType type = PieceType::kNormal;
    int16_t byte = -1;
  };

  SentencePieceModel() = default;

  std::vector<Piece> pieces_;
  absl::flat_hash_map<std::string, int> mergeable_ids_;  // Normal, user-defined, unused.
  absl::flat_hash_map<std::string, int> reserved_ids_;   // Control, unknown, byte.
  absl::flat_hash_map<std::string, int> user_defined_ids_;
  std::vector<size_t> user_defined_lengths_;  // Distinct lengths, longest first.
  bool user_defined_first_bytes_[256] = {};
  int unk_id_ = -1;
  int bos_id_ = -1;
  int eos_id_ = -1;
  bool byte_fallback_ = false;
  std::vector<int> byte_ids_;
  std::string unk_surface_;
  bool add_dummy_prefix_ = true;
  bool remove_extra_whitespaces_ = true;
  bool escape_whitespaces_ = true;
};

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_MODEL_SENTENCEPIECE_MODEL_H_
