// Synthetic Llama weights for benchmarks: the real shapes of a known model (or of one
// tensor-parallel rank of it) filled with seeded random values.
//
// THIS IS NOT A MODEL. Its outputs are meaningless; use it only to measure speed and
// memory (kernel time does not depend on the values). To keep host memory small, all
// layers share one random buffer per tensor shape (a backend that uploads, such as
// cuda, still holds a separate device copy per layer), and every tensor is bfloat16.
#ifndef TANDEM_MODEL_SYNTHETIC_WEIGHTS_H_
#define TANDEM_MODEL_SYNTHETIC_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/weights.h"

namespace tandem {

struct SyntheticModel {
  std::string name;    // The spec it was parsed from, e.g. "llama-2-70b:0/4".
  LlamaConfig config;  // The whole model's configuration.
  int tp_rank = 0;
  int tp_size = 1;
};

// Parses "<model>[:R/N]" with <model> one of
//   llama-1b     (22 layers, hidden 2048, 32 heads, 4 KV heads, MLP 5632, vocab 2048:
//                 the TinyLlama-1.1B body with a small vocabulary)
//   llama-2-7b   (32 layers, hidden 4096, 32 heads, 32 KV heads, MLP 11008, vocab 32000)
//   llama-2-70b  (80 layers, hidden 8192, 64 heads, 8 KV heads, MLP 28672, vocab 32000)
//   tiny         (2 layers, hidden 64, 4 heads, 2 KV heads, MLP 128, vocab 256; tests)
// and the optional suffix selecting tensor-parallel rank R of N (default 0/1).
// "llama-2-70b-shard:R/N" is accepted as a synonym of "llama-2-70b:R/N".
// INVALID_ARGUMENT for an unknown model, a malformed suffix, R outside [0, N), or an
// N that does not divide the heads, KV heads, MLP size and vocabulary.
absl::StatusOr<SyntheticModel> ParseSyntheticModel(const std::string& spec);

// Rank tp_rank's weights (shapes as LoadLlamaWeights would return for a checkpoint of
// this configuration), bfloat16, values uniform in +-sqrt(3 / fan_in) for matrices
// (+-1 for the embedding) and 1 for norm weights, from `seed`. Deterministic.
// RESOURCE_EXHAUSTED if host memory cannot be allocated.
absl::StatusOr<LlamaWeights> MakeSyntheticWeights(const SyntheticModel& model, uint64_t seed);

// One tensor of a synthetic model as a checkpoint would name it, with how its values
// are made. Tensors with the same `values` index hold the same values (all layers
// share them; MakeSyntheticWeights shares one buffer between them).
struct SyntheticTensor {
  enum class Kind { kMatrix, kEmbedding, kNorm };
  std::string name;  // Hugging Face name, e.g. "model.layers.3.mlp.up_proj.weight".
  int64_t rows = 0;  // 1 for a norm vector (stored 1-D as [cols]).
  int64_t cols = 0;
  Kind kind = Kind::kMatrix;  // kMatrix: a linear layer (q/k/v/o, gate/up/down, lm_head).
  int values = 0;             // Index of the value stream, in order of first use.
};

// Every tensor of rank tp_rank (shapes of that rank's slice): the embedding, the final
// norm, lm_head, then each layer's input_layernorm, post_attention_layernorm, q/k/v/o
// and gate/up/down projections.
std::vector<SyntheticTensor> SyntheticTensors(const SyntheticModel& model);

// The bf16 values of one tensor of SyntheticTensors (the values MakeSyntheticWeights
// gives it for `seed`), in its own buffer. RESOURCE_EXHAUSTED if host memory cannot be
// allocated.
absl::StatusOr<HostTensor> MakeSyntheticTensor(const SyntheticTensor& tensor, uint64_t seed);

// Bytes of this rank's weights at 2 bytes per value (embedding included).
int64_t SyntheticWeightBytes(const SyntheticModel& model);

}  // namespace tandem

#endif  // TANDEM_MODEL_SYNTHETIC_WEIGHTS_H_
