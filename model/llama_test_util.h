// Test helpers for the Llama model: random in-memory weights and an independent,
// naive double-precision reference forward pass.
#ifndef TANDEM_MODEL_LLAMA_TEST_UTIL_H_
#define TANDEM_MODEL_LLAMA_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/forward_consumer.h"
#include "model/llama.h"
#include "model/weights.h"

namespace tandem {

// A small GQA config (8 query heads over 4 KV heads, sizes divisible by 4).
LlamaConfig SmallTestConfig();

// Unsharded float32 weights with values drawn from a seeded generator, scaled so
// activations and attention stay well conditioned. Untied LM head unless
// config.tie_word_embeddings.
LlamaWeights RandomLlamaWeights(const LlamaConfig& config, uint64_t seed);

// Logits [tokens.size(), vocab] (row-major) of a plain causal forward over `tokens`
// at RoPE positions `positions` (one per token; empty = 0, 1, ...), computed in double
// precision straight from the definition (Hugging Face Llama). `weights` must be
// unsharded (tp_size 1).
std::vector<double> ReferenceLogits(const LlamaWeights& weights, const std::vector<int32_t>& tokens,
                                    const std::vector<int32_t>& positions = {});

// The LM head of unsharded `weights` applied in double precision to row-major hidden
// rows [rows, hidden_size]: [rows, vocab].
std::vector<double> ReferenceLmHead(const LlamaWeights& weights, const std::vector<float>& hidden);

// Copies a forward's logit rows (row-major) and hidden rows to the host.
class HostOutputsConsumer final : public ForwardConsumer {
 public:
  absl::Status CheckRows(int) const override { return absl::OkStatus(); }
  bool wants_hidden_rows() const override { return true; }
  absl::Status Consume(Backend& backend, const ForwardOutputs& outputs) override;

  std::vector<float> logits;  // [rows, vocab].
  std::vector<float> hidden;  // [rows, hidden_size].

 private:
  std::vector<float> staging_;
};

// `n` token ids drawn uniformly from [0, vocab) by a generator seeded with `seed`.
std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed);

// One sequence's share of a Forward call.
SequenceInput Seq(uint64_t id, int start, std::vector<int32_t> tokens,
                  std::vector<int32_t> logit_indices, std::vector<int32_t> parents = {});

}  // namespace tandem

#endif  // TANDEM_MODEL_LLAMA_TEST_UTIL_H_
