// SentencePiece BPE encoding and decoding of a SentencePieceModel, with exactly
// SentencePiece's results (same ids, same text). Internal to the tokenizer library.
#ifndef TANDEM_MODEL_BPE_H_
#define TANDEM_MODEL_BPE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/sentencepiece_model.h"

namespace tandem {
namespace internal {

// A span text[begin, begin + length) of the text being merged; a frozen symbol is
// never merged with a neighbour.
struct MergeSymbol {
  size_t begin;
  size_t length;
  bool frozen;
};

// The priority of merging adjacent symbols `left` and `right` (views into the text,
// `right` directly after `left`), or nullopt when they do not merge.
using MergePriority =
    absl::FunctionRef<std::optional<float>(absl::string_view left, absl::string_view right)>;

// The BPE merge loop shared by SentencePiece and tokenizer.json models: repeatedly
// merges the adjacent pair of non-frozen symbols with the highest priority (the
// leftmost among equals) until no pair merges. `symbols` tile `text` in order.
// Returns the final symbols in order. O(n log n) in the number of symbols.
std::vector<MergeSymbol> MergeByPriority(absl::string_view text, std::vector<MergeSymbol> symbols,
                                         MergePriority priority);

// `text` (well-formed UTF-8) as SentencePiece normalises it before encoding, with
// identity normalisation. remove_extra_whitespaces: leading and trailing spaces are
// dropped and runs of spaces collapsed to one. add_dummy_prefix: a space is put in
// front of non-empty text. escape_whitespaces: spaces become U+2581 "▁" (and then
// trailing "▁"s also count as trailing spaces). Tabs, newlines and every other
// character pass through unchanged.
std::string Normalize(const SentencePieceModel& model, absl::string_view text);

// Token ids of `normalized` (the output of Normalize). The text is split into user-
// defined pieces (longest match first) and single characters; then, repeatedly,
// the adjacent pair whose concatenation is a vocabulary piece with the highest
// score (the leftmost among equals) is merged; user-defined pieces are never merged
// with a neighbour. Unused pieces are split back into the pieces they were merged
// from. A symbol outside the vocabulary becomes its UTF-8 bytes' <0xNN> pieces with
// byte fallback, else the unknown id (one for each run of unknown symbols).
// O(n log n) in the length of the text.
std::vector<int> EncodeNormalized(const SentencePieceModel& model, absl::string_view normalized);

// Text of `ids` (each in [0, vocab_size())). "▁" decodes to a space, control pieces
// to nothing, the unknown piece to the model's unk_surface (" ⁇ " by default). Each
// run of byte pieces is assembled into UTF-8, one U+FFFD for every byte that does not
// start a well-formed character. `at_text_start`: the ids begin a text, so with
// add_dummy_prefix the first visible piece loses one leading "▁" (with
// remove_extra_whitespaces, every piece loses it until text appears).
std::string DecodeIds(const SentencePieceModel& model, absl::Span<const int> ids,
                      bool at_text_start);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_MODEL_BPE_H_
