// Llama-family model configuration, read from a Hugging Face `config.json`.
#ifndef TANDEM_MODEL_CONFIG_H_
#define TANDEM_MODEL_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {

// RoPE frequency scaling (config.json "rope_scaling").
struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  float factor = 1.0f;                          // linear and llama3
  float low_freq_factor = 1.0f;                 // llama3
  float high_freq_factor = 4.0f;                // llama3
  int original_max_position_embeddings = 8192;  // llama3
};

struct LlamaConfig {
  std::string architecture;  // "LlamaForCausalLM" (also Mistral-style GQA models).
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;    // num_hidden_layers
  int num_heads = 0;     // num_attention_heads
  int num_kv_heads = 0;  // num_key_value_heads (defaults to num_heads)
  int head_dim = 0;      // head_dim, or hidden_size / num_heads
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  int max_position_embeddings = 2048;
  int bos_token_id = 1;
  std::vector<int> eos_token_ids;  // At least one.
  std::string torch_dtype;         // As stored in config.json (informational).

  // Parameters of the whole (unsharded) model.
  long long NumParameters() const;
};

// Parses config.json text. `source` names the file in error messages. Fails with
// INVALID_ARGUMENT on bad JSON, a missing or out-of-range field, or an architecture
// other than a Llama-family causal LM.
absl::StatusOr<LlamaConfig> ParseLlamaConfig(const std::string& json_text,
                                             const std::string& source);

// Reads and parses `model_dir`/config.json.
absl::StatusOr<LlamaConfig> LoadLlamaConfig(const std::string& model_dir);

// RoPE inverse frequencies f_j = theta^(-2j / head_dim), j < head_dim / 2, with the
// config's scaling applied (Hugging Face semantics for linear and llama3).
std::vector<float> RopeInverseFrequencies(const LlamaConfig& config);

}  // namespace tandem

#endif  // TANDEM_MODEL_CONFIG_H_
