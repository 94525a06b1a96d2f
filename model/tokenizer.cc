#include "model/tokenizer.h"

#include <sys/stat.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/sentencepiece_model.h"

namespace tandem {
namespace {

// Byte of a byte-fallback piece "<0xNN>", or -1.
int ParseBytePiece(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = piece[i];
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else return -1;
    value = value * 16 + digit;
  }
  return value;
}

// Length of the UTF-8 sequence that `lead` starts (1 for ASCII and for bytes that
// cannot start a sequence).
int SequenceLength(int lead) {
  if (lead >= 0xF0 && lead <= 0xF7) return 4;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xC0 && lead <= 0xDF) return 2;
  return 1;
}

}  // namespace

bool IsValidUtf8(absl::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // Valid second-byte ranges exclude overlong forms, surrogates and > U+10FFFF.
    unsigned char low = 0x80, high = 0xBF;
    int length;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return false;
    }
    if (size - i < static_cast<size_t>(length)) return false;
    if (bytes[i + 1] < low || bytes[i + 1] > high) return false;
    for (int k = 2; k < length; ++k) {
      if ((bytes[i + k] & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

Tokenizer::Tokenizer() : model_(std::make_unique<internal::SentencePieceModel>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<Tokenizer> Tokenizer::Load(const std::string& path) {
  std::string file = path;
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    file = absl::StrCat(path, "/tokenizer.model");
  }
  if (::stat(file.c_str(), &info) != 0) {
    return absl::NotFoundError(absl::StrCat(file, ": tokenizer model not found"));
  }
  Tokenizer tokenizer;
  std::string error;
  if (!tokenizer.model_->Load(file, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": not a SentencePiece model: ", error));
  }
  const internal::SentencePieceModel& model = *tokenizer.model_;
  tokenizer.vocab_size_ = model.vocab_size();
  tokenizer.bos_id_ = model.bos_id();
  tokenizer.eos_id_ = model.eos_id();
  tokenizer.byte_values_.assign(tokenizer.vocab_size_, -1);
  for (int id = 0; id < tokenizer.vocab_size_; ++id) {
    if (model.IsByte(id)) {
      tokenizer.byte_values_[id] = static_cast<int16_t>(ParseBytePiece(model.IdToPiece(id)));
    }
  }
  // The continuation prefix: the first ordinary piece with visible text.
  for (int id = 0; id < tokenizer.vocab_size_; ++id) {
    if (model.IsControl(id) || model.IsUnknown(id) || model.IsUnused(id) ||
        model.IsByte(id)) {
      continue;
    }
    std::string text;
    if (model.Decode({id}, &text, &error) && !text.empty() && IsValidUtf8(text)) {
      tokenizer.continuation_prefix_id_ = id;
      tokenizer.continuation_prefix_text_ = text;
      break;
    }
  }
  if (tokenizer.continuation_prefix_id_ < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": the vocabulary has no ordinary piece with visible text"));
  }
  return tokenizer;
}

absl::StatusOr<std::vector<int>> Tokenizer::Encode(absl::string_view text,
                                                   bool add_bos) const {
  if (!IsValidUtf8(text)) {
    return absl::InvalidArgumentError("text to tokenize is not valid UTF-8");
  }
  std::vector<int> ids;
  std::string error;
  if (!model_->Encode(std::string(text), &ids, &error)) {
    return absl::InternalError(absl::StrCat("tokenization failed: ", error));
  }
  if (add_bos && bos_id_ >= 0) ids.insert(ids.begin(), bos_id_);
  return ids;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int> ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!IsValidId(ids[i])) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", ids[i], " at index ", i,
                                                     " is outside [0, ", vocab_size_, ")"));
    }
  }
  std::string text, error;
  if (!model_->Decode(std::vector<int>(ids.begin(), ids.end()), &text, &error)) {
    return absl::InternalError(absl::StrCat("detokenization failed: ", error));
  }
  return text;
}

absl::StatusOr<std::string> Tokenizer::DecodeContinuation(const std::vector<int>& ids) const {
  std::vector<int> with_prefix;
  with_prefix.reserve(ids.size() + 1);
  with_prefix.push_back(continuation_prefix_id_);
  with_prefix.insert(with_prefix.end(), ids.begin(), ids.end());
  auto text = Decode(with_prefix);
  if (!text.ok()) return text.status();
  if (text->compare(0, continuation_prefix_text_.size(), continuation_prefix_text_) != 0) {
    return absl::InternalError("continuation prefix did not decode as expected");
  }
  return text->substr(continuation_prefix_text_.size());
}

std::string Tokenizer::IdToPiece(int id) const {
  return IsValidId(id) ? model_->IdToPiece(id) : std::string();
}

bool Tokenizer::IsControl(int id) const { return IsValidId(id) && model_->IsControl(id); }

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer, bool after_text)
    : tokenizer_(tokenizer), after_text_(after_text), at_start_(!after_text) {}

absl::StatusOr<std::string> IncrementalDetokenizer::Add(absl::Span<const int> ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!tokenizer_->IsValidId(ids[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[i], " is outside [0, ", tokenizer_->vocab_size(),
                       ")"));
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
  const std::vector<int> segment(pending_.begin(), pending_.begin() + end);
  absl::StatusOr<std::string> text = at_start_ ? tokenizer_->Decode(segment)
                                               : tokenizer_->DecodeContinuation(segment);
  // Ids were validated on entry, so decoding cannot fail.
  if (!text.ok()) return std::string();
  if (at_start_ && text->empty()) return std::string();
  at_start_ = false;
  pending_.erase(pending_.begin(), pending_.begin() + end);
  return *std::move(text);
}

}  // namespace tandem
