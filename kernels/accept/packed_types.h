// Plain-old-data records of packed verify chains and draft rows (packed_batch.h) and the
// pointer views the block-parallel algorithms (accept_algorithm.h) read and write. No
// library dependency: this header is also compiled by nvcc.
#ifndef TANDEM_KERNELS_ACCEPT_PACKED_TYPES_H_
#define TANDEM_KERNELS_ACCEPT_PACKED_TYPES_H_

#include <cstddef>
#include <cstdint>

#include "spec/host_device.h"

namespace tandem {
namespace accept {

// Logits in the LogitsView layout (verify_accept.h): `parts` vocabulary slices,
// rank-major. Not owned.
struct LogitsRef {
  const float* data = nullptr;
  int32_t rows = 0, vocab = 0, parts = 1;

  // Entry (row, v).
  TANDEM_HOST_DEVICE float At(size_t row, int v) const {
    const int slice = vocab / parts;
    return data[(size_t(v / slice) * rows + row) * slice + v % slice];
  }
};

// spec::SamplingConfig.
struct PackedSampling {
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
};

// One chain's or tree's parameters (a VerifyChain with its rule resolved to numbers).
struct PackedChain {
  int32_t first_row = 0;       // Logit row of p_1 (a tree: p_root); rows first_row..+K.
  int32_t num_proposals = 0;   // K.
  int32_t proposal_begin = 0;  // Index of proposal 1 in the token / q_begin / parents arrays.
  int32_t output_begin = 0;    // Index of this chain's first output slot (K + 1 slots).
  int32_t is_tree = 0;         // 1: a tree, its parents at proposal_begin in BatchView::parents.
  PackedSampling sampling;
  int32_t rule = 0;    // spec::AcceptanceRule as int.
  float alpha = 0.0f;  // spec::AlphaOrDefault of the params.
  float theta_first = 0.0f, theta_last = 0.0f, epsilon = 0.0f, delta = 0.0f;
  int32_t want_logprobs = 0;
  uint64_t seed = 0;
  uint64_t sample_index = 0;
  uint64_t position = 0;  // spec::RandomKey::position: absolute position of proposal 1.
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
  LogitsRef logits;
  const PackedChain* chains = nullptr;
  int32_t num_chains = 0;
  const int32_t* tokens = nullptr;   // Proposals.
  const int32_t* q_begin = nullptr;  // Proposals + 1 offsets into q_ids / q_probs.
  const int32_t* q_ids = nullptr;
  const float* q_probs = nullptr;
  const int32_t* parents = nullptr;    // Proposals: parent in [-1, i) within the sequence.
  float* probs = nullptr;              // Workspace [num_chains, vocab]: the current processed row.
  double* weights = nullptr;           // Workspace [num_chains, vocab].
  double* residual = nullptr;          // Workspace [num_chains, vocab]; only trees under
                                       // rejection read it (may be null otherwise).
  double* node_values = nullptr;       // Workspace [proposals]: trees' per-node values.
  int32_t* out_tokens = nullptr;       // [sum of K + 1] slots, chain c at output_begin.
  float* out_logprobs = nullptr;       // Same slots; written when want_logprobs.
  int32_t* out_path = nullptr;         // Same slots: a tree's accepted node indices.
  PackedStatus* out_status = nullptr;  // [num_chains].
};

// One draft row (a DraftRow, draft_sample.h).
struct PackedDraftRow {
  int32_t row = 0;           // Logit row.
  int32_t q_size = 1;        // Most entries of q.
  int32_t output_begin = 0;  // First of this row's q_size q slots.
  PackedSampling sampling;
  int32_t coupled = 0;  // DraftRow::coupled.
  uint64_t seed = 0;
  uint64_t position = 0;
};

// Everything the draft sampling of one batch touches (as BatchView). Not owned.
struct DraftView {
  LogitsRef logits;
  const PackedDraftRow* drafts = nullptr;
  int32_t num_drafts = 0;
  float* probs = nullptr;           // Workspace [num_drafts, vocab].
  double* weights = nullptr;        // Workspace [num_drafts, vocab].
  int32_t* out_tokens = nullptr;    // [num_drafts]: the proposal, -1 when none.
  int32_t* out_q_counts = nullptr;  // [num_drafts]: entries of q written.
  int32_t* out_q_ids = nullptr;     // [sum of q_size] slots, row i at output_begin.
  float* out_q_probs = nullptr;     // Same slots.
};

}  // namespace accept
}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_PACKED_TYPES_H_
