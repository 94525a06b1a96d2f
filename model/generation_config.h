// What a Hugging Face model directory says about generation: the tokens that end it
// (a list: Llama-3 ends at <|end_of_text|>, <|eom_id|> and <|eot_id|>) and the sampling
// defaults that apply where a request leaves a parameter unset.
#ifndef TANDEM_MODEL_GENERATION_CONFIG_H_
#define TANDEM_MODEL_GENERATION_CONFIG_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/tokenizer.h"

namespace tandem {

// generation_config.json's sampling fields; unset when the file does not give them.
struct SamplingDefaults {
  std::optional<float> temperature;  // "temperature", >= 0.
  std::optional<float> top_p;        // "top_p", (0, 1].
  std::optional<int> top_k;          // "top_k", >= 0 (0 = no limit).
  std::optional<bool> do_sample;     // "do_sample"; false means greedy decoding.
};

struct GenerationConfig {
  // Generation ends at any of these ids: sorted, no duplicates. Empty when the model
  // names none (generation then ends at the length limit or a stop string).
  std::vector<int> stop_token_ids;
  SamplingDefaults sampling;
};

// Reads `model_dir`'s generation_config.json ("eos_token_id": an id or a list, and the
// sampling fields), config.json's "eos_token_id" when generation_config.json has none
// (as Hugging Face derives one from the other), and tokenizer_config.json's
// "eos_token" (a token string or {"content": ...}); every file is optional. The stop
// ids are the union of those and tokenizer.eos_id(). INVALID_ARGUMENT, naming the file
// and field, for malformed JSON, an id outside [0, tokenizer.vocab_size()), an
// eos_token that is not one of the tokenizer's tokens, or a sampling field out of range.
absl::StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& model_dir,
                                                      const Tokenizer& tokenizer);

// The model directory of a tokenizer path as Tokenizer::Load takes it: `path` itself
// when it is a directory, else the directory holding the file.
std::string ModelDirectoryOf(const std::string& path);

}  // namespace tandem

#endif  // TANDEM_MODEL_GENERATION_CONFIG_H_
