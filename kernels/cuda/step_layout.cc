#include "kernels/cuda/step_layout.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace cuda {
namespace {

constexpr size_t kAlign = 16;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

template <typename T>
void Put(std::vector<uint8_t>& blob, size_t offset, const std::vector<T>& values) {
  if (!values.empty()) std::memcpy(blob.data() + offset, values.data(), values.size() * sizeof(T));
}

}  // namespace

absl::StatusOr<StepLayout> BuildStepLayout(const StepPlan& plan, int chunk_keys) {
  if (chunk_keys <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("BuildStepLayout: chunk_keys ", chunk_keys));
  }
  if (absl::Status status = ValidateStepPlan(plan); !status.ok()) return status;
  const int rows = plan.num_rows();
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();

  std::vector<int32_t> table_offset(rows), prefix(rows), extra_begin(rows + 1, 0),
      chunk_begin(rows + 1, 0), chunk_row, extra_keys, tables;
  StepLayout layout;
  layout.rows = rows;
  for (const StepPlan::Sequence& seq : plan.sequences) {
    if (int64_t(tables.size()) + int64_t(seq.block_table.size()) > kIntMax) {
      return absl::OutOfRangeError("BuildStepLayout: block tables exceed 2^31 entries");
    }
    const int32_t offset = static_cast<int32_t>(tables.size());
    tables.insert(tables.end(), seq.block_table.begin(), seq.block_table.end());
    for (int32_t block : seq.block_table)
      layout.max_block_id = std::max(layout.max_block_id, block);
    std::vector<int32_t> chain;
    for (int i = 0; i < seq.row_count; ++i) {
      const int r = seq.row_begin + i;
      table_offset[r] = offset;
      int64_t keys;
      if (seq.parents.empty()) {
        prefix[r] = seq.context_length + i + 1;  // ValidateStepPlan bounds this by the table.
        keys = prefix[r];
      } else {
        prefix[r] = seq.context_length;
        chain.clear();
        for (int a = i; a >= 0; a = seq.parents[a]) chain.push_back(seq.context_length + a);
        std::reverse(chain.begin(), chain.end());  // Ancestors have smaller indices.
        extra_keys.insert(extra_keys.end(), chain.begin(), chain.end());
        keys = int64_t(prefix[r]) + int64_t(chain.size());
      }
      if (int64_t(extra_keys.size()) > kIntMax) {
        return absl::OutOfRangeError("BuildStepLayout: tree key lists exceed 2^31 entries");
      }
      extra_begin[r + 1] = static_cast<int32_t>(extra_keys.size());
      const int64_t chunks = (keys + chunk_keys - 1) / chunk_keys;
      if (int64_t(chunk_begin[r]) + chunks > kIntMax) {
        return absl::OutOfRangeError("BuildStepLayout: more than 2^31 attention chunks");
      }
      chunk_begin[r + 1] = static_cast<int32_t>(chunk_begin[r] + chunks);
      chunk_row.insert(chunk_row.end(), static_cast<size_t>(chunks), r);
      layout.max_keys = std::max<int>(layout.max_keys, static_cast<int>(keys));
    }
  }
  layout.total_chunks = chunk_begin[rows];
  layout.num_extra_keys = static_cast<int>(extra_keys.size());
  for (int32_t token : plan.tokens) layout.max_token = std::max(layout.max_token, token);
  for (int64_t slot : plan.kv_slots) layout.max_slot = std::max(layout.max_slot, slot);

  size_t bytes = 0;
  auto section = [&bytes](size_t size) {
    const size_t offset = bytes;
    bytes = AlignUp(bytes + size);
    return offset;
  };
  layout.kv_slots = section(sizeof(int64_t) * rows);
  layout.tokens = section(sizeof(int32_t) * rows);
  layout.positions = section(sizeof(int32_t) * rows);
  layout.row_table_offset = section(sizeof(int32_t) * rows);
  layout.row_prefix = section(sizeof(int32_t) * rows);
  layout.row_extra_begin = section(sizeof(int32_t) * (rows + 1));
  layout.row_chunk_begin = section(sizeof(int32_t) * (rows + 1));
  layout.chunk_row = section(sizeof(int32_t) * chunk_row.size());
  layout.extra_keys = section(sizeof(int32_t) * extra_keys.size());
  layout.block_tables = section(sizeof(int32_t) * tables.size());
  layout.blob.assign(std::max<size_t>(bytes, kAlign), 0);
  Put(layout.blob, layout.kv_slots, plan.kv_slots);
  Put(layout.blob, layout.tokens, plan.tokens);
  Put(layout.blob, layout.positions, plan.positions);
  Put(layout.blob, layout.row_table_offset, table_offset);
  Put(layout.blob, layout.row_prefix, prefix);
  Put(layout.blob, layout.row_extra_begin, extra_begin);
  Put(layout.blob, layout.row_chunk_begin, chunk_begin);
  Put(layout.blob, layout.chunk_row, chunk_row);
  Put(layout.blob, layout.extra_keys, extra_keys);
  Put(layout.blob, layout.block_tables, tables);
  return layout;
}

}  // namespace cuda
}  // namespace tandem
