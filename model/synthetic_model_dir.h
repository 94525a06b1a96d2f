// Writes a synthetic model (model/synthetic_weights.h: real shapes, seeded random
// values, NOT A MODEL) as a Hugging Face model directory that every Tandem worker loads,
// with its linear matrices in any weight format: e.g. a 7B-shape q8_0 draft next to the
// bundled target, for memory and speed runs (`tandem synth`).
#ifndef TANDEM_MODEL_SYNTHETIC_MODEL_DIR_H_
#define TANDEM_MODEL_SYNTHETIC_MODEL_DIR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "model/config.h"

namespace tandem {

struct SyntheticModelDirOptions {
  std::string shape = "llama-2-7b";  // A ParseSyntheticModel name, without ":R/N".
  int vocab_size = 0;                // 0: tokenizer_from's, else the shape's own.
  // A model directory whose tokenizer files are copied and whose config.json gives the
  // vocab_size, bos and eos ids; "" writes no tokenizer.
  std::string tokenizer_from;
  DType format = DType::kBF16;  // Of the linear matrices; embedding and norms stay bf16.
  uint64_t seed = 0;            // MakeSyntheticWeights' seed.
};

struct SyntheticModelDirReport {
  LlamaConfig config;                     // As written to config.json.
  int tensors = 0;                        // Safetensors entries (a q8_0 matrix counts 2).
  int64_t tensor_bytes = 0;               // Bytes of tensor data in model.safetensors.
  std::vector<std::string> copied_files;  // File names copied from tokenizer_from.
};

// Writes `out_dir`/config.json (the shape's configuration with the chosen vocabulary,
// plus "tandem_synthetic" naming the shape and seed), `out_dir`/model.safetensors and
// tokenizer_from's tokenizer.json, tokenizer.model, tokenizer_config.json,
// special_tokens_map.json, generation_config.json and chat_template.jinja (those that
// exist). The tensors are those of MakeSyntheticWeights(shape, seed) with the linear
// matrices converted by ConvertLinearWeights(format): LoadLlamaWeights(out_dir) returns
// them bitwise. Streams: memory is about one tensor, never the whole model. out_dir is
// created if missing.
// Errors: INVALID_ARGUMENT for an unknown shape, a ":R/N" suffix, a negative vocab_size,
// a vocab_size other than tokenizer_from's, a tokenizer larger than the vocabulary, or
// an out_dir that already holds a model (config.json or *.safetensors); those of
// loading tokenizer_from's config and tokenizer; RESOURCE_EXHAUSTED when a tensor cannot
// be allocated; INTERNAL on a write failure.
absl::StatusOr<SyntheticModelDirReport> WriteSyntheticModelDir(
    const SyntheticModelDirOptions& options, const std::string& out_dir);

}  // namespace tandem

#endif  // TANDEM_MODEL_SYNTHETIC_MODEL_DIR_H_
