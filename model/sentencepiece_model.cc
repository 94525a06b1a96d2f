// No Abseil includes here (see sentencepiece_model.h).
#include "model/sentencepiece_model.h"

#include <sentencepiece_processor.h>

namespace tandem {
namespace internal {

SentencePieceModel::SentencePieceModel()
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

SentencePieceModel::~SentencePieceModel() = default;

bool SentencePieceModel::Load(const std::string& path, std::string* error) {
  const auto status = processor_->Load(path);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

bool SentencePieceModel::Encode(const std::string& text, std::vector<int>* ids,
                                std::string* error) const {
  const auto status = processor_->Encode(text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

bool SentencePieceModel::Decode(const std::vector<int>& ids, std::string* text,
                                std::string* error) const {
  const auto status = processor_->Decode(ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

int SentencePieceModel::vocab_size() const { return processor_->GetPieceSize(); }
int SentencePieceModel::bos_id() const { return processor_->bos_id(); }
int SentencePieceModel::eos_id() const { return processor_->eos_id(); }
int SentencePieceModel::unk_id() const { return processor_->unk_id(); }
bool SentencePieceModel::IsControl(int id) const { return processor_->IsControl(id); }
bool SentencePieceModel::IsUnknown(int id) const { return processor_->IsUnknown(id); }
bool SentencePieceModel::IsUnused(int id) const { return processor_->IsUnused(id); }
bool SentencePieceModel::IsByte(int id) const { return processor_->IsByte(id); }
std::string SentencePieceModel::IdToPiece(int id) const {
  return processor_->IdToPiece(id);
}

}  // namespace internal
}  // namespace tandem
