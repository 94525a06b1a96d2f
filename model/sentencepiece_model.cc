#include "model/sentencepiece_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/utf8.h"
#include "sentencepiece/sentencepiece_model.pb.h"

namespace tandem {
namespace internal {
namespace {

using ModelProto = ::sentencepiece_format::ModelProto;
using ProtoPiece = ::sentencepiece_format::ModelProto::SentencePiece;
using TrainerSpec = ::sentencepiece_format::TrainerSpec;

// Byte of a byte-fallback piece "<0xNN>" (upper-case hex, as SentencePiece writes
// them), or -1.
int ParseBytePiece(absl::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = piece[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

const char* ModelTypeName(int type) {
  switch (type) {
    case TrainerSpec::UNIGRAM:
      return "UNIGRAM";
    case TrainerSpec::BPE:
      return "BPE";
    case TrainerSpec::WORD:
      return "WORD";
    case TrainerSpec::CHAR:
      return "CHAR";
    default:
      return "unknown";
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceModel>> SentencePieceModel::Parse(
    absl::string_view serialized, absl::string_view source) {
  auto invalid = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", parts...));
  };
  ModelProto proto;
  if (serialized.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !proto.ParseFromArray(serialized.data(), static_cast<int>(serialized.size()))) {
    return invalid("not a SentencePiece model (cannot parse a ModelProto)");
  }
  if (proto.pieces_size() == 0) {
    return invalid("not a SentencePiece model (the vocabulary is empty)");
  }
  const TrainerSpec& trainer = proto.trainer_spec();
  if (trainer.model_type() != TrainerSpec::BPE) {
    return invalid("unsupported SentencePiece model type ", ModelTypeName(trainer.model_type()),
                   " (only BPE is supported)");
  }
  if (!proto.normalizer_spec().precompiled_charsmap().empty()) {
    return invalid("unsupported SentencePiece normalizer '", proto.normalizer_spec().name(),
                   "' (only identity normalization, without a precompiled charsmap, "
                   "is supported)");
  }
  if (!proto.denormalizer_spec().precompiled_charsmap().empty()) {
    return invalid("unsupported SentencePiece denormalizer '", proto.denormalizer_spec().name(),
                   "' (only none is supported)");
  }
  if (trainer.treat_whitespace_as_suffix()) {
    return invalid("unsupported SentencePiece option treat_whitespace_as_suffix");
  }
  if (!IsWellFormedUtf8(trainer.unk_surface())) {
    return invalid("unk_surface is not valid UTF-8");
  }

  std::unique_ptr<SentencePieceModel> model(new SentencePieceModel());
  model->byte_fallback_ = trainer.byte_fallback();
  model->unk_surface_ = trainer.unk_surface();
  model->add_dummy_prefix_ = proto.normalizer_spec().add_dummy_prefix();
  model->remove_extra_whitespaces_ = proto.normalizer_spec().remove_extra_whitespaces();
  model->escape_whitespaces_ = proto.normalizer_spec().escape_whitespaces();
  model->byte_ids_.assign(256, -1);
  model->pieces_.resize(proto.pieces_size());
  for (int id = 0; id < proto.pieces_size(); ++id) {
    const ProtoPiece& in = proto.pieces(id);
    Piece& piece = model->pieces_[id];
    piece.text = in.piece();
    piece.score = in.score();
    piece.type = static_cast<PieceType>(in.type());
    if (piece.text.empty()) return invalid("piece ", id, " is empty");
    if (std::isnan(piece.score)) return invalid("piece ", id, " has a NaN score");
    if (!IsWellFormedUtf8(piece.text)) return invalid("piece ", id, " is not valid UTF-8");
    const bool mergeable = piece.type == PieceType::kNormal ||
                           piece.type == PieceType::kUserDefined ||
                           piece.type == PieceType::kUnused;
    auto& ids = mergeable ? model->mergeable_ids_ : model->reserved_ids_;
    if (!ids.emplace(piece.text, id).second) {
      return invalid("piece '", piece.text, "' is defined twice");
    }
    switch (piece.type) {
      case PieceType::kUnknown:
        if (model->unk_id_ >= 0) return invalid("more than one unknown piece");
        model->unk_id_ = id;
        break;
      case PieceType::kUserDefined:
        model->user_defined_ids_.emplace(piece.text, id);
        model->user_defined_lengths_.push_back(piece.text.size());
        model->user_defined_first_bytes_[static_cast<uint8_t>(piece.text[0])] = true;
        break;
      case PieceType::kByte: {
        if (!model->byte_fallback_) {
          return invalid("byte piece '", piece.text, "' in a model without byte_fallback");
        }
        const int byte = ParseBytePiece(piece.text);
        if (byte < 0) return invalid("byte piece '", piece.text, "' is not <0xNN>");
        piece.byte = static_cast<int16_t>(byte);
        model->byte_ids_[byte] = id;
        break;
      }
      default:
        break;
    }
  }
  if (model->unk_id_ < 0) return invalid("the vocabulary has no unknown piece");
  if (model->byte_fallback_ &&
      std::count(model->byte_ids_.begin(), model->byte_ids_.end(), -1) > 0) {
    return invalid("byte_fallback is on but not all 256 <0xNN> pieces are present");
  }
  std::vector<size_t>& lengths = model->user_defined_lengths_;
  std::sort(lengths.begin(), lengths.end(), std::greater<size_t>());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  // BOS/EOS are the control pieces named by the trainer spec, if present.
  auto control_id = [&](const std::string& text) {
    const int id = model->PieceToId(text);
    return model->type(id) == PieceType::kControl ? id : -1;
  };
  model->bos_id_ = control_id(trainer.bos_piece());
  model->eos_id_ = control_id(trainer.eos_piece());
  return model;
}

int SentencePieceModel::FindMergeable(absl::string_view text) const {
  const auto it = mergeable_ids_.find(text);
  return it == mergeable_ids_.end() ? -1 : it->second;
}

int SentencePieceModel::PieceToId(absl::string_view text) const {
  const auto reserved = reserved_ids_.find(text);
  if (reserved != reserved_ids_.end()) return reserved->second;
  const int id = FindMergeable(text);
  return id >= 0 ? id : unk_id_;
}

size_t SentencePieceModel::MatchUserDefined(absl::string_view text) const {
  if (text.empty() || !user_defined_first_bytes_[static_cast<uint8_t>(text[0])]) return 0;
  for (const size_t length : user_defined_lengths_) {
    if (length <= text.size() && user_defined_ids_.contains(text.substr(0, length))) {
      return length;
    }
  }
  return 0;
}

}  // namespace internal
}  // namespace tandem
