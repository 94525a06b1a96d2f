// Plain-old-data records of a packed verify batch (packed_batch.h) and the pointer view
// the block-parallel acceptance (accept_algorithm.h) reads and writes. No library
// dependency: this header is also compiled by nvcc.
#ifndef TANDEM_KERNELS_ACCEPT_PACKED_TYPES_H_
#define TANDEM_KERNELS_ACCEPT_PACKED_TYPES_H_

#include <cstdint>

namespace tandem {
namespace accept {

// One chain's parameters (a VerifyChain with its rule resolved to numbers).
struct PackedChain {
  int32_t first_row = 0;       // Logit row of p_1; the chain reads rows first_row..+K.
  int32_t num_proposals = 0;   // K.
  int32_t proposal_begin = 0;  // Index of proposal 1 in the token / q_begin arrays.
  int32_t output_begin = 0;    // Index of this chain's first output slot (K + 1 slots).
  float temperature = 0.0f;    // spec::SamplingConfig.
  int32_t top_k = 0;
  float top_p = 1.0f;
  int32_t rule = 0;    // spec::AcceptanceRule as int.
  float alpha = 0.0f;  // spec::AlphaOrDefault of the params.
  float theta_first = 0.0f, theta_last = 0.0f, epsilon = 0.0f, delta = 0.0f;
  int32_t want_logprobs = 0;
  uint64_t seed = 0;
  uint64_t sample_index = 0;
};

// What a chain reports besides its tokens.
struct PackedStatus {
  int32_t num_committed = 0;  // 1..K+1 on success.
  int32_t num_accepted = 0;
  int32_t error_index = -1;  // >= 0: target distribution with no positive probability.
};

// Everything the acceptance of one batch touches, as pointers into one memory space
// (host memory for the emulation, device memory for the kernel). Not owned.
struct BatchView {
  // Logits: LogitsView layout (verify_accept.h): `parts` vocabulary slices, rank-major.
  const float* logits = nullptr;
  int32_t rows = 0, vocab = 0, parts = 1;
  const PackedChain* chains = nullptr;
  int32_t num_chains = 0;
  const int32_t* tokens = nullptr;   // Proposals.
  const int32_t* q_begin = nullptr;  // Proposals + 1 offsets into q_ids / q_probs.
  const int32_t* q_ids = nullptr;
  const float* q_probs = nullptr;
  float* probs = nullptr;     // Workspace [num_chains, vocab]: the current processed row.
  double* weights = nullptr;  // Workspace [num_chains, vocab].
  int32_t* out_tokens = nullptr;  // [sum of K + 1] slots, chain c at output_begin.
  float* out_logprobs = nullptr;  // Same slots; written when want_logprobs.
  PackedStatus* out_status = nullptr;  // [num_chains].
};

}  // namespace accept
}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_PACKED_TYPES_H_
