// Host-side packing of a StepPlan into the flat index arrays the CUDA kernels read:
// one byte blob that the CUDA backend uploads once per forward pass. Pure C++ (no CUDA),
// so it is tested on any machine.
#ifndef TANDEM_KERNELS_CUDA_STEP_LAYOUT_H_
#define TANDEM_KERNELS_CUDA_STEP_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace tandem {
namespace cuda {

// Byte offsets (16-byte aligned) of the arrays inside `blob`, and facts the backend
// checks on the host before launching kernels.
//
// Arrays (rows = plan.num_rows()):
//   kv_slots         int64 [rows]      plan.kv_slots
//   tokens           int32 [rows]      plan.tokens
//   positions        int32 [rows]      plan.positions
//   row_table_offset int32 [rows]      start of the row's sequence in block_tables
//   row_prefix       int32 [rows]      the row sees logical keys [0, row_prefix)...
//   row_extra_begin  int32 [rows + 1]  ...then extra_keys[row_extra_begin[r] ..
//                                       row_extra_begin[r + 1]) (tree ancestors and
//                                       itself, ascending)
//   row_chunk_begin  int32 [rows + 1]  the row's key chunks (ceil(keys / chunk_keys))
//   chunk_row        int32 [total_chunks]
//   extra_keys       int32 [...]
//   block_tables     int32 [...]       every sequence's block table, in order
// A chain row i of a sequence sees prefix context_length + i + 1 and no extras; a tree
// row sees prefix context_length plus its ancestors and itself as extras (the
// Backend::Attention mask).
struct StepLayout {
  size_t kv_slots = 0, tokens = 0, positions = 0, row_table_offset = 0, row_prefix = 0,
         row_extra_begin = 0, row_chunk_begin = 0, chunk_row = 0, extra_keys = 0, block_tables = 0;
  std::vector<uint8_t> blob;  // The packed arrays; blob.size() is the upload size.
  int rows = 0;
  int total_chunks = 0;
  int num_extra_keys = 0;
  int max_keys = 0;           // Most keys any row sees.
  int32_t max_token = -1;     // Largest token id (-1 without rows).
  int64_t max_slot = -1;      // Largest kv slot (-1 without rows).
  int32_t max_block_id = -1;  // Largest block id in any block table.

  // Typed views of the blob (for tests and debugging).
  template <typename T>
  const T* Array(size_t offset) const {
    return reinterpret_cast<const T*>(blob.data() + offset);
  }
};

// Packs `plan` (checked with ValidateStepPlan first: INVALID_ARGUMENT as it says)
// with key chunks of `chunk_keys` (> 0). OUT_OF_RANGE when a count does not fit the
// int32 arrays.
absl::StatusOr<StepLayout> BuildStepLayout(const StepPlan& plan, int chunk_keys);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_KERNELS_CUDA_STEP_LAYOUT_H_
