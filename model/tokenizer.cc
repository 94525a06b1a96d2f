#include "model/tokenizer.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/bpe.h"
#include "model/sentencepiece_model.h"
#include "model/utf8.h"

namespace tandem {
namespace {

// Length of the UTF-8 sequence that `lead` starts (1 for ASCII and for bytes that
// cannot start a sequence).
int SequenceLength(int lead) {
  if (lead >= 0xF0 && lead <= 0xF7) return 4;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xC0 && lead <= 0xDF) return 2;
  return 1;
}

}  // namespace

bool IsValidUtf8(absl::string_view text) { return internal::IsWellFormedUtf8(text); }

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<Tokenizer> Tokenizer::Load(const std::string& path) {
  std::string file = path;
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    file = absl::StrCat(path, "/tokenizer.model");
  }
  if (::stat(file.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::NotFoundError(absl::StrCat(file, ": tokenizer model not found"));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in.is_open()) {
    return absl::NotFoundError(absl::StrCat(file, ": cannot open the tokenizer model"));
  }
  std::stringstream contents;
  contents << in.rdbuf();
  auto model = internal::SentencePieceModel::Parse(contents.str(), file);
  if (!model.ok()) return model.status();
  Tokenizer tokenizer;
  tokenizer.model_ = *std::move(model);
  const internal::SentencePieceModel& m = *tokenizer.model_;
  tokenizer.vocab_size_ = m.vocab_size();
  tokenizer.bos_id_ = m.bos_id();
  tokenizer.eos_id_ = m.eos_id();
  tokenizer.byte_values_.resize(tokenizer.vocab_size_);
  for (int id = 0; id < tokenizer.vocab_size_; ++id) {
    tokenizer.byte_values_[id] = static_cast<int16_t>(m.byte_value(id));
  }
  return tokenizer;
}

absl::StatusOr<std::vector<int>> Tokenizer::Encode(absl::string_view text, bool add_bos) const {
  if (!IsValidUtf8(text)) {
    return absl::InvalidArgumentError("text to tokenize is not valid UTF-8");
  }
  std::vector<int> ids;
  if (add_bos && bos_id_ >= 0) ids.push_back(bos_id_);
  const std::vector<int> text_ids =
      internal::EncodeNormalized(*model_, internal::Normalize(*model_, text));
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
  return internal::DecodeIds(*model_, ids, /*at_text_start=*/true);
}

absl::StatusOr<std::string> Tokenizer::DecodeContinuation(absl::Span<const int> ids) const {
  if (absl::Status status = CheckIds(ids); !status.ok()) return status;
  return internal::DecodeIds(*model_, ids, /*at_text_start=*/false);
}

std::string Tokenizer::IdToPiece(int id) const {
  return IsValidId(id) ? model_->piece(id) : std::string();
}

bool Tokenizer::IsControl(int id) const {
  return IsValidId(id) && model_->type(id) == internal::PieceType::kControl;
}

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
  // Hold back a trailing byte-fallback sequence that does not yet form a whole
  // character: find the last lead byte among the final (at most 4) byte tokens.
  size_t complete_end = pending_.size();
  int continuation_bytes = 0;
  for (size_t i = pending_.size(); i > 0 && pending_.size() - i < 4; --i) {
    const int byte = tokenizer_->ByteValue(pending_[i - 1]);
    if (byte < 0) break;  // An ordinary piece ends any byte sequence.
    if ((byte & 0xC0) == 0x80) {
      ++continuation_bytes;
      continue;
    }
    if (SequenceLength(byte) > continuation_bytes + 1) complete_end = i - 1;
    break;
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
