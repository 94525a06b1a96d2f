#include "model/bpe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/sentencepiece_test_models.h"

namespace tandem {
namespace internal {
namespace {

using ::testing::ElementsAre;

constexpr char kSpace[] = "\xE2\x96\x81";  // "▁"

// Pieces of the encoding of `text` (normalised first).
std::vector<std::string> Pieces(const SentencePieceModel& model, const std::string& text) {
  std::vector<std::string> pieces;
  for (const int id : EncodeNormalized(model, Normalize(model, text))) {
    pieces.push_back(model.piece(id));
  }
  return pieces;
}

// A model whose single characters are a, b, c, d, x, "▁".
TestModelProto Letters(bool byte_fallback = false) {
  TestModelProto proto = MinimalBpeProto(byte_fallback);
  for (const char* c : {"a", "b", "c", "d", "x", kSpace}) AddPiece(&proto, c, -10);
  return proto;
}

TEST(BpeEncodeTest, MergesTheHighestScoringPairFirst) {
  TestModelProto proto = Letters();
  AddPiece(&proto, "ab", -2);
  AddPiece(&proto, "bc", -1);
  EXPECT_THAT(Pieces(*ParseOrDie(proto), "abc"), ElementsAre("a", "bc"));
  proto.mutable_pieces(proto.pieces_size() - 1)->set_score(-3);
  EXPECT_THAT(Pieces(*ParseOrDie(proto), "abc"), ElementsAre("ab", "c"));
}

TEST(BpeEncodeTest, EqualScoresMergeTheLeftmostPair) {
  TestModelProto proto = Letters();
  AddPiece(&proto, "ab", -1);
  AddPiece(&proto, "bc", -1);
  AddPiece(&proto, "aa", -1);
  const auto model = ParseOrDie(proto);
  EXPECT_THAT(Pieces(*model, "abc"), ElementsAre("ab", "c"));
  EXPECT_THAT(Pieces(*model, "aaa"), ElementsAre("aa", "a"));
  EXPECT_THAT(Pieces(*model, "aaaaa"), ElementsAre("aa", "aa", "a"));
}

TEST(BpeEncodeTest, MergesRepeatWhileAPairIsInTheVocabulary) {
  TestModelProto proto = Letters();
  AddPiece(&proto, "cd", -1);
  AddPiece(&proto, "ab", -2);
  AddPiece(&proto, "abcd", -3);
  AddPiece(&proto, "abcdx", -4);  // Reachable only after abcd exists.
  const auto model = ParseOrDie(proto);
  EXPECT_THAT(Pieces(*model, "abcdx"), ElementsAre("abcdx"));
  EXPECT_THAT(Pieces(*model, "abcdab"), ElementsAre("abcd", "ab"));
  EXPECT_THAT(Pieces(*model, "xabc"), ElementsAre("x", "ab", "c"));
  EXPECT_THAT(Pieces(*model, ""), ElementsAre());
}

TEST(BpeEncodeTest, UnusedPiecesAreSplitIntoThePiecesTheyWereMergedFrom) {
  TestModelProto proto = Letters();
  AddPiece(&proto, "ab", -1);
  AddPiece(&proto, "abc", -2, TestPiece::UNUSED);
  AddPiece(&proto, "abcd", -3, TestPiece::UNUSED);
  AddPiece(&proto, "abcdx", -4);
  const auto model = ParseOrDie(proto);
  EXPECT_THAT(Pieces(*model, "abc"), ElementsAre("ab", "c"));
  EXPECT_THAT(Pieces(*model, "abcd"), ElementsAre("ab", "c", "d"));
  // A normal piece merged through unused ones stays whole.
  EXPECT_THAT(Pieces(*model, "abcdx"), ElementsAre("abcdx"));
}

TEST(BpeEncodeTest, UserDefinedPiecesStayWholeAndNeverMerge) {
  TestModelProto proto = Letters();
  AddPiece(&proto, "<t>", 0, TestPiece::USER_DEFINED);
  AddPiece(&proto, "abc", 0, TestPiece::USER_DEFINED);
  AddPiece(&proto, "ab", 0, TestPiece::USER_DEFINED);
  AddPiece(&proto, "xa", -1);
  AddPiece(&proto, "dx", -1);
  const auto model = ParseOrDie(proto);
  // "abc" is the longest match; "xa" would need the 'a' of a user-defined piece.
  EXPECT_THAT(Pieces(*model, "xabcd"), ElementsAre("x", "abc", "d"));
  EXPECT_THAT(Pieces(*model, "abx"), ElementsAre("ab", "x"));
  // "<", "t", ">" are not in the vocabulary, but "<t>" is one piece.
  EXPECT_THAT(Pieces(*model, "dx<t>xa"), ElementsAre("dx", "<t>", "xa"));
}

TEST(BpeEncodeTest, UnknownCharactersBecomeBytesOrOneUnknownPerRun) {
  TestModelProto proto = Letters(/*byte_fallback=*/true);
  AddPiece(&proto, "ab", -1);
  const auto with_bytes = ParseOrDie(proto);
  // U+00E9 é = C3 A9; U+20AC € = E2 82 AC.
  EXPECT_THAT(Pieces(*with_bytes, "ab\xC3\xA9x\xE2\x82\xAC"),
              ElementsAre("ab", "<0xC3>", "<0xA9>", "x", "<0xE2>", "<0x82>", "<0xAC>"));
  // Control and byte pieces are never produced from their spelling in the text.
  EXPECT_THAT(Pieces(*with_bytes, "<s>"), ElementsAre("<0x3C>", "<0x73>", "<0x3E>"));

  const auto without_bytes = ParseOrDie(Letters(/*byte_fallback=*/false));
  EXPECT_THAT(EncodeNormalized(*without_bytes,
                               "\xC3\xA9\xE2\x82\xAC"
                               "a\xC3\xA9"),
              ElementsAre(0, without_bytes->FindMergeable("a"), 0));
}

TEST(BpeNormalizeTest, DummyPrefixEscapingAndExtraWhitespace) {
  TestModelProto proto = Letters();
  const auto plain = ParseOrDie(proto);
  EXPECT_EQ(Normalize(*plain, " a  b\t"),
            "\xE2\x96\x81"
            "a"
            "\xE2\x96\x81\xE2\x96\x81"
            "b\t");
  EXPECT_EQ(Normalize(*plain, ""), "");

  proto.mutable_normalizer_spec()->set_add_dummy_prefix(true);
  const auto dummy = ParseOrDie(proto);
  EXPECT_EQ(Normalize(*dummy, "a b"), std::string(kSpace) + "a" + kSpace + "b");
  EXPECT_EQ(Normalize(*dummy, " "), std::string(kSpace) + kSpace);
  EXPECT_EQ(Normalize(*dummy, ""), "");

  proto.mutable_normalizer_spec()->set_remove_extra_whitespaces(true);
  const auto collapse = ParseOrDie(proto);
  EXPECT_EQ(Normalize(*collapse, "  a   b  "), std::string(kSpace) + "a" + kSpace + "b");
  EXPECT_EQ(Normalize(*collapse, "   "), "");
  // Only spaces collapse; a tab is an ordinary character.
  EXPECT_EQ(Normalize(*collapse, " \t a"), std::string(kSpace) + "\t" + kSpace + "a");
  // A literal "▁" at the end counts as a trailing space.
  EXPECT_EQ(Normalize(*collapse, std::string("a") + kSpace), std::string(kSpace) + "a");

  proto.mutable_normalizer_spec()->set_escape_whitespaces(false);
  const auto unescaped = ParseOrDie(proto);
  EXPECT_EQ(Normalize(*unescaped, "  a   b  "), " a b");
}

TEST(BpeDecodeTest, SpacesControlAndUnknownPieces) {
  TestModelProto proto = Letters();
  const int space_a = AddPiece(&proto, std::string(kSpace) + "a", -1);
  const int space = proto.pieces_size() - 2;  // "▁" (added by Letters).
  const auto model = ParseOrDie(proto);
  EXPECT_EQ(DecodeIds(*model, {1, space_a, space, 0, 2}, true), " a  \xE2\x81\x87 ");
  EXPECT_EQ(DecodeIds(*model, {}, true), "");

  proto.mutable_trainer_spec()->set_unk_surface("<?>");
  EXPECT_EQ(DecodeIds(*ParseOrDie(proto), {0, space_a}, true), "<?> a");
}

TEST(BpeDecodeTest, DummyPrefixSpaceIsRemovedOnceAtTheStart) {
  TestModelProto proto = Letters();
  const int space = proto.pieces_size() - 1;
  const int space_a = AddPiece(&proto, std::string(kSpace) + "a", -1);
  proto.mutable_normalizer_spec()->set_add_dummy_prefix(true);
  const auto model = ParseOrDie(proto);
  EXPECT_EQ(DecodeIds(*model, {space_a, space_a}, true), "a a");
  // BOS decodes to nothing and does not end the start of the text.
  EXPECT_EQ(DecodeIds(*model, {1, space_a}, true), "a");
  // The first "▁" is the dummy prefix; the next piece keeps its space.
  EXPECT_EQ(DecodeIds(*model, {space, space_a}, true), " a");
  // Continuing earlier text: nothing is removed.
  EXPECT_EQ(DecodeIds(*model, {space_a}, false), " a");

  proto.mutable_normalizer_spec()->set_remove_extra_whitespaces(true);
  const auto collapse = ParseOrDie(proto);
  // Every leading "▁" goes until some text appears.
  EXPECT_EQ(DecodeIds(*collapse, {space, space, space_a, space_a}, true), "a a");
}

TEST(BpeDecodeTest, ByteRunsBecomeUtf8WithReplacementForBadBytes) {
  const auto model = ParseOrDie(Letters(/*byte_fallback=*/true));
  auto bytes = [&](const std::string& text) {
    std::vector<int> ids;
    for (const char c : text) ids.push_back(model->byte_id(static_cast<uint8_t>(c)));
    return ids;
  };
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(DecodeIds(*model, bytes("\xE2\x82\xAC"), true), "\xE2\x82\xAC");
  // One U+FFFD per byte that does not start a well-formed character.
  EXPECT_EQ(DecodeIds(*model, bytes("\xE4\xB8"), true), fffd + fffd);
  EXPECT_EQ(DecodeIds(*model, bytes("\xC0\x80"), true), fffd + fffd);
  EXPECT_EQ(DecodeIds(*model, bytes("\xED\xA0\x80"), true), fffd + fffd + fffd);
  EXPECT_EQ(DecodeIds(*model, bytes("\xE4\xB8\xE4\xB8\x96"), true), fffd + fffd + "\xE4\xB8\x96");
  EXPECT_EQ(DecodeIds(*model, bytes("\xEF\xBF\xBD"), true), fffd);
  // A piece between bytes splits the run: E2 | 82 AC are decoded separately.
  std::vector<int> split = bytes("\xE2");
  split.push_back(model->FindMergeable("a"));
  for (const int id : bytes("\x82\xAC")) split.push_back(id);
  EXPECT_EQ(DecodeIds(*model, split, true), fffd + "a" + fffd + fffd);
}

}  // namespace
}  // namespace internal
}  // namespace tandem
