// No Abseil includes here (see sentencepiece_model.h).
#include "model/sentencepiece_test_trainer.h"

#include <sentencepiece_trainer.h>

namespace tandem {

std::string TrainSentencePieceForTest(const std::string& args) {
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  return status.ok() ? std::string() : status.ToString();
}

}  // namespace tandem
