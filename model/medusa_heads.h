// Medusa-1 heads (Cai et al. 2024, arXiv 2401.10774) on a Llama model's final-normed
// hidden state, loaded from the Medusa project's checkpoint layout in the model
// directory:
//   medusa_lm_head.safetensors: for head i < medusa_num_heads and residual block
//     j < medusa_num_layers, "{i}.{j}.linear.weight" [hidden, hidden] and
//     "{i}.{j}.linear.bias" [hidden], then the head's own LM head "{i}.{L}.weight"
//     [vocab, hidden] with L = medusa_num_layers (F32, F16 or BF16), nothing else;
//   config.json: "medusa_num_heads" and "medusa_num_layers" (required when the file is
//     there), and optionally "medusa_choices" (Tandem's key: the candidate tree, below).
// Head i computes x = h, then x = x + SiLU(W_j x + b_j) per block, logits_i = W_lm x; it
// predicts the token i + 1 positions past the one the base LM head predicts from h.
#ifndef TANDEM_MODEL_MEDUSA_HEADS_H_
#define TANDEM_MODEL_MEDUSA_HEADS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/weights.h"

namespace tandem {

inline constexpr char kMedusaHeadsFile[] = "medusa_lm_head.safetensors";
// Largest rank a medusa_choices path may name (each head's top-k is taken on the host).
inline constexpr int kMaxMedusaRank = 64;

struct MedusaConfig {
  int num_heads = 0;
  int num_layers = 0;
  // The candidate tree as Medusa's `medusa_choices`: path p names the node reached by
  // taking, at depth d (0-based), the token of rank p[d] in head d's top-k. Most likely
  // first, and every path's parent (p without its last entry) comes before it, so any
  // leading part of the list is a tree (a request's tree of n nodes is the first n).
  std::vector<std::vector<int>> choices;

  // Of the first `nodes` paths (all when nodes < 0): 1 + the largest rank any names
  // (the top-k each head needs) and the longest path (the heads needed); 0 when none.
  int TopK(int nodes = -1) const;
  int Depth(int nodes = -1) const;
};

// The paths used when config.json has no "medusa_choices": a small generic tree, its
// paths deeper than `num_heads` dropped.
std::vector<std::vector<int>> DefaultMedusaChoices(int num_heads);

// OK when `choices` is a tree as MedusaConfig::choices describes, with paths of 1 to
// `num_heads` entries, ranks in [0, kMaxMedusaRank), no duplicates; else
// INVALID_ARGUMENT naming `source` and the first bad path.
absl::Status ValidateMedusaChoices(const std::vector<std::vector<int>>& choices, int num_heads,
                                   const std::string& source);

struct MedusaHostHead {
  std::vector<HostTensor> weights;  // Per block: [hidden, hidden].
  std::vector<HostTensor> biases;   // Per block: [1, hidden].
  HostTensor lm_head;               // [vocab, hidden].
};

struct MedusaHostWeights {
  MedusaConfig config;
  int hidden_size = 0;
  int vocab_size = 0;
  std::vector<MedusaHostHead> heads;  // config.num_heads of them.
};

// The heads in `model_dir` for a base model of `base`'s shape: std::nullopt when
// medusa_lm_head.safetensors is absent. Errors, each one INVALID_ARGUMENT (NOT_FOUND for
// an unreadable config.json) naming the file and field or tensor: a missing or out of
// range config key (heads 1..16, layers 0..8), bad medusa_choices, a malformed file, a
// missing or extra tensor, a tensor whose shape does not match the base model's hidden
// size or vocabulary.
absl::StatusOr<std::optional<MedusaHostWeights>> LoadMedusaHeads(const std::string& model_dir,
                                                                 const LlamaConfig& base);

// The heads on a backend. Not thread-safe (one scratch area).
class MedusaHeads {
 public:
  // Uploads `weights` to `backend` (borrowed; must outlive the heads). Errors: the
  // backend's upload or allocation errors.
  static absl::StatusOr<std::unique_ptr<MedusaHeads>> Create(const MedusaHostWeights& weights,
                                                             Backend* backend);

  const MedusaConfig& config() const { return config_; }
  int hidden_size() const { return hidden_; }
  int vocab_size() const { return vocab_; }

  // The logits of heads 0..heads-1 (all when heads < 0 or > num_heads) for one hidden
  // row: `hidden_row` is [hidden_size] float32 in the backend's memory; *logits becomes
  // host [heads, vocab_size] (head-major). Synchronizes. Errors: the backend's copy
  // errors.
  absl::Status Forward(const float* hidden_row, std::vector<float>* logits, int heads = -1);

 private:
  struct Head {
    std::vector<Weight> weights;
    std::vector<Buffer> biases;  // float32 in backend memory (ops take float32 operands).
    Weight lm_head;
  };
  MedusaHeads(Backend* backend, MedusaConfig config, int hidden, int vocab)
      : backend_(backend), config_(std::move(config)), hidden_(hidden), vocab_(vocab) {}

  Backend* backend_;
  MedusaConfig config_;
  int hidden_;
  int vocab_;
  std::vector<Head> heads_;
  Buffer x_, t_, act_, ones_, logits_;  // Scratch: [hidden] x4, [num_heads, vocab].
};

}  // namespace tandem

#endif  // TANDEM_MODEL_MEDUSA_HEADS_H_
