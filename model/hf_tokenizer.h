// A Hugging Face tokenizer.json with a BPE model: byte-level BPE (GPT-2, Llama-3, Qwen)
// and the SentencePiece-style BPE that Hugging Face exports for Llama-2 and Mistral
// (byte fallback, "▁" for spaces). Internal to the tokenizer library; callers use
// Tokenizer, which picks this format when a model directory holds tokenizer.json.
#ifndef TANDEM_MODEL_HF_TOKENIZER_H_
#define TANDEM_MODEL_HF_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/hf_decoder.h"
#include "model/hf_pretokenizer.h"
#include "model/tokenizer_model.h"

namespace tandem {
namespace internal {

// Encoding follows Hugging Face's `encode(text, add_special_tokens=False)`: added
// tokens are matched in the raw text first (leftmost, longest), the rest is normalized,
// pre-tokenized and BPE-merged word by word (lowest merge rank first, the leftmost
// among equals). Decoding follows `decode(ids, skip_special_tokens=True)`. Added tokens
// marked "normalized" are matched in the raw text too (Hugging Face matches them in the
// normalized text; none of Llama-2/Mistral, Llama-3 and Qwen3 has one).
class HfTokenizer final : public TokenizerModel {
 public:
  // `tokenizer_json`: the text of tokenizer.json; `config_json`: the text of
  // tokenizer_config.json, or "" when there is none (it names the BOS/EOS tokens).
  // `source` names the files in errors. INVALID_ARGUMENT for malformed JSON, a model
  // other than BPE, or a normalizer, pre-tokenizer or decoder this does not implement.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Parse(absl::string_view tokenizer_json,
                                                            absl::string_view config_json,
                                                            const std::string& source);

  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_id_; }
  std::vector<int> Encode(absl::string_view text) const override;
  std::string Decode(absl::Span<const int> ids, bool at_text_start) const override;
  std::string RawBytes(int id) const override;
  std::string Piece(int id) const override { return pieces_[id]; }
  int PieceToId(absl::string_view piece) const override;
  int ByteValue(int id) const override { return byte_fallback_ ? byte_values_[id] : -1; }
  bool IsControl(int id) const override { return special_[id]; }

 private:
  struct AddedToken {
    int id;
    std::string content;
    bool lstrip;  // Swallows the whitespace before it.
    bool rstrip;  // Swallows the whitespace after it.
  };
  // A stretch of the input: plain text, or an added token (id >= 0).
  struct Segment {
    absl::string_view text;
    int added_id;
  };

  HfTokenizer() = default;
  absl::Status ParseModel(const nlohmann::json& model, const std::string& source);
  absl::Status ParseMerges(const nlohmann::json& merges, const std::string& source);
  absl::Status ParseAddedTokens(const nlohmann::json& added, const std::string& source);
  void FindBosEos(const nlohmann::json& post_processor, const nlohmann::json& config);

  std::vector<Segment> SplitAddedTokens(absl::string_view text) const;
  // Appends the ids of one pre-tokenized word.
  void EncodeWord(absl::string_view word, std::vector<int>* ids) const;
  // The model-vocabulary id of `piece`, or -1.
  int VocabId(absl::string_view piece) const;

  std::vector<std::string> pieces_;              // Per id ("" for an id without a token).
  std::vector<bool> special_;                    // Per id: a special added token.
  std::vector<int16_t> byte_values_;             // Per id: NN of a <0xNN> token, else -1.
  int byte_ids_[256] = {};                       // Per byte NN: the id of <0xNN>, or -1.
  absl::flat_hash_map<std::string, int> vocab_;  // The BPE model's vocabulary.
  // (left, right) -> rank; the views point into vocab_'s keys (vocab_ is not changed
  // after the merges are read).
  absl::flat_hash_map<std::pair<absl::string_view, absl::string_view>, int> merge_ranks_;
  std::vector<AddedToken> added_tokens_;  // Longest first.
  absl::flat_hash_map<std::string, int> added_ids_;
  bool added_first_bytes_[256] = {};  // Bytes that start an added token.
  int unk_id_ = -1;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  HfNormalizer normalizer_;
  HfPreTokenizer pre_tokenizer_;
  HfDecoder decoder_;
  int bos_id_ = -1;
  int eos_id_ = -1;
};

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_MODEL_HF_TOKENIZER_H_
