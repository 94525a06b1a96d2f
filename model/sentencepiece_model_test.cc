#include "model/sentencepiece_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "model/sentencepiece_test_models.h"

namespace tandem {
namespace internal {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

absl::Status ParseStatus(const TestModelProto& proto) {
  return SentencePieceModel::Parse(proto.SerializeAsString(), "dir/tokenizer.model").status();
}

void ExpectRejected(const TestModelProto& proto, const std::string& reason) {
  const absl::Status status = ParseStatus(proto);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << reason;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("dir/tokenizer.model"), HasSubstr(reason)));
}

TEST(SentencePieceModelTest, ReadsPiecesSpecialIdsAndOptions) {
  TestModelProto proto = MinimalBpeProto(/*byte_fallback=*/true);
  proto.mutable_normalizer_spec()->set_add_dummy_prefix(true);
  proto.mutable_trainer_spec()->set_unk_surface("??");
  const int ab = AddPiece(&proto, "ab", -1.5f);
  const int user = AddPiece(&proto, "<tool>", 0, TestPiece::USER_DEFINED);
  const int longer_user = AddPiece(&proto, "<tool>s", 0, TestPiece::USER_DEFINED);
  const int unused = AddPiece(&proto, "abc", -2, TestPiece::UNUSED);
  const auto model = ParseOrDie(proto);
  EXPECT_EQ(model->vocab_size(), 3 + 256 + 4);
  EXPECT_EQ(model->unk_id(), 0);
  EXPECT_EQ(model->bos_id(), 1);
  EXPECT_EQ(model->eos_id(), 2);
  EXPECT_EQ(model->piece(ab), "ab");
  EXPECT_EQ(model->score(ab), -1.5f);
  EXPECT_EQ(model->type(unused), PieceType::kUnused);
  EXPECT_EQ(model->byte_id(0x41), 3 + 0x41);
  EXPECT_EQ(model->byte_value(3 + 0x41), 0x41);
  EXPECT_EQ(model->byte_value(ab), -1);
  EXPECT_EQ(model->unk_surface(), "??");
  EXPECT_TRUE(model->add_dummy_prefix());
  EXPECT_FALSE(model->remove_extra_whitespaces());
  EXPECT_TRUE(model->escape_whitespaces());
  // Merging reaches normal, user-defined and unused pieces, never special ones.
  EXPECT_EQ(model->FindMergeable("ab"), ab);
  EXPECT_EQ(model->FindMergeable("abc"), unused);
  EXPECT_EQ(model->FindMergeable("<tool>"), user);
  EXPECT_EQ(model->FindMergeable("<s>"), -1);
  EXPECT_EQ(model->FindMergeable("<0x41>"), -1);
  EXPECT_EQ(model->PieceToId("<s>"), 1);
  EXPECT_EQ(model->PieceToId("<0x41>"), 3 + 0x41);
  EXPECT_EQ(model->PieceToId("zz"), 0);
  // The longest user-defined piece wins.
  EXPECT_EQ(model->MatchUserDefined("<tool>s!"), 7u);
  EXPECT_EQ(model->MatchUserDefined("<tool>x"), 6u);
  EXPECT_EQ(model->MatchUserDefined("<too"), 0u);
  EXPECT_EQ(model->MatchUserDefined(""), 0u);
  EXPECT_EQ(model->type(longer_user), PieceType::kUserDefined);
}

TEST(SentencePieceModelTest, BosAndEosAreTheNamedControlPieces) {
  TestModelProto proto = MinimalBpeProto(false);
  proto.mutable_trainer_spec()->set_bos_piece("<|begin|>");
  proto.mutable_trainer_spec()->set_eos_piece("x");
  const int begin = AddPiece(&proto, "<|begin|>", 0, TestPiece::CONTROL);
  AddPiece(&proto, "x", 0);  // Named as EOS, but not a control piece.
  const auto model = ParseOrDie(proto);
  EXPECT_EQ(model->bos_id(), begin);
  EXPECT_EQ(model->eos_id(), -1);

  TestModelProto without = MinimalBpeProto(false);
  without.mutable_pieces()->DeleteSubrange(1, 2);  // No <s>, </s>.
  EXPECT_EQ(ParseOrDie(without)->bos_id(), -1);
}

TEST(SentencePieceModelTest, AcceptsAnyNormalizerNameWithoutCharsmap) {
  TestModelProto proto = MinimalBpeProto(false);
  proto.mutable_normalizer_spec()->set_name("nmt_nfkc");
  EXPECT_TRUE(ParseStatus(proto).ok());
  proto.clear_normalizer_spec();  // Defaults: dummy prefix, whitespace collapsing.
  const auto model = ParseOrDie(proto);
  EXPECT_TRUE(model->add_dummy_prefix());
  EXPECT_TRUE(model->remove_extra_whitespaces());
}

TEST(SentencePieceModelTest, RejectsUnsupportedModels) {
  TestModelProto unigram = MinimalBpeProto(false);
  unigram.mutable_trainer_spec()->set_model_type(::sentencepiece_format::TrainerSpec::UNIGRAM);
  ExpectRejected(unigram, "model type UNIGRAM");
  TestModelProto nfkc = MinimalBpeProto(false);
  nfkc.mutable_normalizer_spec()->set_name("nmt_nfkc");
  nfkc.mutable_normalizer_spec()->set_precompiled_charsmap("\x01\x02\x03");
  ExpectRejected(nfkc, "normalizer 'nmt_nfkc'");
  TestModelProto denormalizer = MinimalBpeProto(false);
  denormalizer.mutable_denormalizer_spec()->set_precompiled_charsmap("\x01");
  ExpectRejected(denormalizer, "denormalizer");
  TestModelProto suffix = MinimalBpeProto(false);
  suffix.mutable_trainer_spec()->set_treat_whitespace_as_suffix(true);
  ExpectRejected(suffix, "treat_whitespace_as_suffix");
}

TEST(SentencePieceModelTest, RejectsMalformedModels) {
  EXPECT_THAT(SentencePieceModel::Parse("not a model", "f.model").status().message(),
              AllOf(HasSubstr("f.model"), HasSubstr("cannot parse")));
  ExpectRejected(TestModelProto(), "vocabulary is empty");

  TestModelProto duplicate = MinimalBpeProto(false);
  AddPiece(&duplicate, "ab", 0);
  AddPiece(&duplicate, "ab", 0, TestPiece::USER_DEFINED);
  ExpectRejected(duplicate, "'ab' is defined twice");
  TestModelProto empty_piece = MinimalBpeProto(false);
  AddPiece(&empty_piece, "", 0);
  ExpectRejected(empty_piece, "piece 3 is empty");
  TestModelProto nan_score = MinimalBpeProto(false);
  AddPiece(&nan_score, "ab", std::nanf(""));
  ExpectRejected(nan_score, "piece 3 has a NaN score");
  TestModelProto bad_utf8 = MinimalBpeProto(false);
  AddPiece(&bad_utf8, "a\xFF", 0);
  ExpectRejected(bad_utf8, "piece 3 is not valid UTF-8");
  TestModelProto no_unknown = MinimalBpeProto(false);
  no_unknown.mutable_pieces(0)->set_type(TestPiece::CONTROL);
  ExpectRejected(no_unknown, "no unknown piece");
  TestModelProto two_unknown = MinimalBpeProto(false);
  AddPiece(&two_unknown, "<unk2>", 0, TestPiece::UNKNOWN);
  ExpectRejected(two_unknown, "more than one unknown piece");

  TestModelProto stray_byte = MinimalBpeProto(false);
  AddPiece(&stray_byte, "<0x41>", 0, TestPiece::BYTE);
  ExpectRejected(stray_byte, "without byte_fallback");
  TestModelProto missing_byte = MinimalBpeProto(true);
  missing_byte.mutable_pieces()->DeleteSubrange(3 + 0x80, 1);
  ExpectRejected(missing_byte, "not all 256");
  TestModelProto bad_byte = MinimalBpeProto(true);
  AddPiece(&bad_byte, "<0xZZ>", 0, TestPiece::BYTE);
  ExpectRejected(bad_byte, "'<0xZZ>' is not <0xNN>");
}

}  // namespace
}  // namespace internal
}  // namespace tandem
