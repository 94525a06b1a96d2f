// Test helper: hand-built SentencePiece BPE models (ModelProto) for unit tests.
#ifndef TANDEM_MODEL_SENTENCEPIECE_TEST_MODELS_H_
#define TANDEM_MODEL_SENTENCEPIECE_TEST_MODELS_H_

#include <memory>
#include <string>

#include "model/sentencepiece_model.h"
#include "sentencepiece/sentencepiece_model.pb.h"

namespace tandem {
namespace internal {

using TestModelProto = ::sentencepiece_format::ModelProto;
using TestPiece = ::sentencepiece_format::ModelProto::SentencePiece;

// A BPE model with identity normalisation, no dummy prefix, extra whitespace kept,
// and the pieces <unk> (id 0), <s> (1), </s> (2), then, with `byte_fallback`,
// <0x00>..<0xFF> (ids 3..258).
TestModelProto MinimalBpeProto(bool byte_fallback);

// Appends a piece; returns its id.
int AddPiece(TestModelProto* proto, const std::string& text, float score,
             TestPiece::Type type = TestPiece::NORMAL);

// Parses `proto`; aborts the test binary (with the reason) if it is rejected.
std::unique_ptr<SentencePieceModel> ParseOrDie(const TestModelProto& proto);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_MODEL_SENTENCEPIECE_TEST_MODELS_H_
