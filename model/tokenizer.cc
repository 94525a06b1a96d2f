#include "model/tokenizer.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/bpe.h"
#include "model/hf_tokenizer.h"
#include "model/sentencepiece_model.h"
#include "model/tokenizer_model.h"
#include "model/utf8.h"

namespace tandem {
namespace {

// A SentencePiece model behind the TokenizerModel interface.
class SentencePieceTokenizer final : public internal::TokenizerModel {
 public:
  explicit SentencePieceTokenizer(std::unique_ptr<internal::SentencePieceModel> model)
      : model_(std::move(model)) {}

  int vocab_size() const override { return model_->vocab_size(); }
  int bos_id() const override { return model_->bos_id(); }
  int eos_id() const override { return model_->eos_id(); }
  std::vector<int> Encode(absl::string_view text) const override {
    return internal::EncodeNormalized(*model_, internal::Normalize(*model_, text));
  }
  std::string Decode(absl::Span<const int> ids, bool at_text_start) const override {
    return internal::DecodeIds(*model_, ids, at_text_start);
  }
  std::string RawBytes(int id) const override {
    if (model_->type(id) == internal::PieceType::kByte) {
      return std::string(1, static_cast<char>(model_->byte_value(id)));
    }
    return internal::DecodeIds(*model_, absl::MakeConstSpan(&id, 1), /*at_text_start=*/false);
  }
  std::string Piece(int id) const override { return model_->piece(id); }
  int PieceToId(absl::string_view piece) const override {
    const int id = model_->PieceToId(piece);
    return id >= 0 && model_->piece(id) == piece ? id : -1;
  }
  int ByteValue(int id) const override { return model_->byte_value(id); }
  bool IsControl(int id) const override {
    return model_->type(id) == internal::PieceType::kControl;
  }

 private:
  std::unique_ptr<internal::SentencePieceModel> model_;
};

bool IsDirectory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool IsRegularFile(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) return absl::NotFoundError(absl::StrCat(path, ": cannot open the file"));
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// tokenizer.json at `file`, with tokenizer_config.json from the same directory.
absl::StatusOr<std::unique_ptr<internal::TokenizerModel>> LoadTokenizerJson(
    const std::string& file) {
  absl::StatusOr<std::string> json = ReadFile(file);
  if (!json.ok()) return json.status();
  const size_t slash = file.rfind('/');
  const std::string config_file =
      (slash == std::string::npos ? std::string() : file.substr(0, slash + 1)) +
      "tokenizer_config.json";
  std::string config;
  if (IsRegularFile(config_file)) {
    absl::StatusOr<std::string> text = ReadFile(config_file);
    if (!text.ok()) return text.status();
    config = *std::move(text);
  }
  auto model = internal::HfTokenizer::Parse(*json, config, file);
  if (!model.ok()) return model.status();
  return std::unique_ptr<internal::TokenizerModel>(*std::move(model));
}

absl::StatusOr<std::unique_ptr<internal::TokenizerModel>> LoadSentencePiece(
    const std::string& file) {
  absl::StatusOr<std::string> serialized = ReadFile(file);
  if (!serialized.ok()) return serialized.status();
  auto model = internal::SentencePieceModel::Parse(*serialized, file);
  if (!model.ok()) return model.status();
  return std::unique_ptr<internal::TokenizerModel>(
      std::make_unique<SentencePieceTokenizer>(*std::move(model)));
}

}  // namespace

bool IsValidUtf8(absl::string_view text) { return internal::IsWellFormedUtf8(text); }

Tokenizer::Tokenizer(std::unique_ptr<internal::TokenizerModel> model)
    : model_(std::move(model)),
      vocab_size_(model_->vocab_size()),
      bos_id_(model_->bos_id()),
      eos_id_(model_->eos_id()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<Tokenizer> Tokenizer::Load(const std::string& path) {
  std::string file = path;
  if (IsDirectory(path)) {
    file = absl::StrCat(path, "/tokenizer.json");
    if (!IsRegularFile(file)) file = absl::StrCat(path, "/tokenizer.model");
  }
  if (!IsRegularFile(file)) {
    return absl::NotFoundError(
        absl::StrCat(file, ": tokenizer not found (expected tokenizer.json or tokenizer.model)"));
  }
  absl::StatusOr<std::unique_ptr<internal::TokenizerModel>> model =
      absl::EndsWith(file, ".json") ? LoadTokenizerJson(file) : LoadSentencePiece(file);
  if (!model.ok()) return model.status();
  return Tokenizer(*std::move(model));
}

absl::StatusOr<std::vector<int>> Tokenizer::Encode(absl::string_view text, bool add_bos) const {
  if (!IsValidUtf8(text)) {
    return absl::InvalidArgumentError("text to tokenize is not valid UTF-8");
  }
  std::vector<int> ids;
  if (add_bos && bos_id_ >= 0) ids.push_back(bos_id_);
  const std::vector<int> text_ids = model_->Encode(text);
  ids.insert(ids.end(), text_ids.begin(), text_ids.end());
  return ids;
}

absl::Status Tokenizer::CheckIds(absl::Span<const int> ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!IsValidId(ids[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[i], " at index ", i, " is outside [0, ", vocab_size_, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int> ids) const {
  if (absl::Status status = CheckIds(ids); !status.ok()) return status;
  return model_->Decode(ids, /*at_text_start=*/true);
}

absl::StatusOr<std::string> Tokenizer::DecodeContinuation(absl::Span<const int> ids) const {
  if (absl::Status status = CheckIds(ids); !status.ok()) return status;
  return model_->Decode(ids, /*at_text_start=*/false);
}

std::string Tokenizer::IdToPiece(int id) const {
  return IsValidId(id) ? model_->Piece(id) : std::string();
}

int Tokenizer::PieceToId(absl::string_view piece) const { return model_->PieceToId(piece); }

int Tokenizer::ByteValue(int id) const { return IsValidId(id) ? model_->ByteValue(id) : -1; }

bool Tokenizer::IsControl(int id) const { return IsValidId(id) && model_->IsControl(id); }

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer, bool after_text)
    : tokenizer_(tokenizer), after_text_(after_text), at_start_(!after_text) {}

absl::StatusOr<std::string> IncrementalDetokenizer::Add(absl::Span<const int> ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!tokenizer_->IsValidId(ids[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[i], " is outside [0, ", tokenizer_->vocab_size(), ")"));
    }
  }
  pending_.insert(pending_.end(), ids.begin(), ids.end());
  // Hold back the ids whose bytes end inside a character that later ids may complete:
  // emit the longest prefix of the pending ids whose bytes do not end that way.
  std::string bytes;
  std::vector<size_t> byte_ends;  // Per pending id: the end of its bytes.
  for (const int id : pending_) {
    bytes += tokenizer_->model_->RawBytes(id);
    byte_ends.push_back(bytes.size());
  }
  size_t complete_end = pending_.size();
  while (complete_end > 0 && internal::EndsWithPartialCharacter(
                                 absl::string_view(bytes).substr(0, byte_ends[complete_end - 1]))) {
    --complete_end;
  }
  return Emit(complete_end);
}

std::string IncrementalDetokenizer::Flush() {
  std::string text = Emit(pending_.size());
  Reset();
  return text;
}

void IncrementalDetokenizer::Reset() {
  pending_.clear();
  at_start_ = !after_text_;
}

std::string IncrementalDetokenizer::Emit(size_t end) {
  if (end == 0) return std::string();
  // Byte sequences split at a lead byte decode independently, and ids that follow
  // visible text decode without the leading-space stripping applied at the start.
  // While no text has appeared, decode from the stream start: ids that decoded to
  // nothing (BOS, a stripped leading "▁") still decide whether a later piece's
  // leading space is stripped.
  const absl::Span<const int> segment(pending_.data(), end);
  absl::StatusOr<std::string> text =
      at_start_ ? tokenizer_->Decode(segment) : tokenizer_->DecodeContinuation(segment);
  // Ids were validated on entry, so decoding cannot fail.
  if (!text.ok()) return std::string();
  if (at_start_ && text->empty()) return std::string();
  at_start_ = false;
  pending_.erase(pending_.begin(), pending_.begin() + end);
  return *std::move(text);
}

}  // namespace tandem
