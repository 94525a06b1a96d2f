// Test helper: trains a small SentencePiece model (std-only interface; see
// sentencepiece_model.h for why libsentencepiece stays out of Abseil code).
#ifndef TANDEM_MODEL_SENTENCEPIECE_TEST_TRAINER_H_
#define TANDEM_MODEL_SENTENCEPIECE_TEST_TRAINER_H_

#include <string>

namespace tandem {

// Runs the SentencePiece trainer with command-line style `args`
// ("--input=... --model_prefix=... ..."). Returns "" on success, else the error.
std::string TrainSentencePieceForTest(const std::string& args);

}  // namespace tandem

#endif  // TANDEM_MODEL_SENTENCEPIECE_TEST_TRAINER_H_
