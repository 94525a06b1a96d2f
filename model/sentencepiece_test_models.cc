#include "model/sentencepiece_test_models.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_format.h"

namespace tandem {
namespace internal {

TestModelProto MinimalBpeProto(bool byte_fallback) {
  TestModelProto proto;
  auto* trainer = proto.mutable_trainer_spec();
  trainer->set_model_type(::sentencepiece_format::TrainerSpec::BPE);
  trainer->set_byte_fallback(byte_fallback);
  auto* normalizer = proto.mutable_normalizer_spec();
  normalizer->set_name("identity");
  normalizer->set_add_dummy_prefix(false);
  normalizer->set_remove_extra_whitespaces(false);
  AddPiece(&proto, "<unk>", 0, TestPiece::UNKNOWN);
  AddPiece(&proto, "<s>", 0, TestPiece::CONTROL);
  AddPiece(&proto, "</s>", 0, TestPiece::CONTROL);
  if (byte_fallback) {
    for (int byte = 0; byte < 256; ++byte) {
      AddPiece(&proto, absl::StrFormat("<0x%02X>", byte), 0, TestPiece::BYTE);
    }
  }
  return proto;
}

int AddPiece(TestModelProto* proto, const std::string& text, float score, TestPiece::Type type) {
  TestPiece* piece = proto->add_pieces();
  piece->set_piece(text);
  piece->set_score(score);
  piece->set_type(type);
  return proto->pieces_size() - 1;
}

std::unique_ptr<SentencePieceModel> ParseOrDie(const TestModelProto& proto) {
  auto model = SentencePieceModel::Parse(proto.SerializeAsString(), "test model");
  if (!model.ok()) {
    std::fprintf(stderr, "test model rejected: %s\n", model.status().ToString().c_str());
    std::abort();
  }
  return *std::move(model);
}

}  // namespace internal
}  // namespace tandem
