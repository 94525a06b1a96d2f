#include "kernels/backend.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tandem {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kQ8_0:
      return 1;
    case DType::kQ4_0:
      return 0;
  }
  return 0;
}

int64_t StoredRowBytes(DType dtype, int64_t cols) {
  return dtype == DType::kQ4_0 ? Q4BytesPerRow(cols) : cols * int64_t(DTypeSize(dtype));
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kQ8_0:
      return "q8_0";
    case DType::kQ4_0:
      return "q4_0";
  }
  return "unknown";
}

absl::StatusOr<Weight> Backend::UploadQ8Weight(const void*, const void*, int64_t, int64_t,
                                               std::shared_ptr<const void>) {
  return absl::UnimplementedError(
      absl::StrCat(name(), ": q8_0 weights are not supported by this backend yet"));
}

absl::StatusOr<Weight> Backend::UploadQ4Weight(const void*, const void*, int64_t, int64_t,
                                               std::shared_ptr<const void>) {
  return absl::UnimplementedError(
      absl::StrCat(name(), ": q4_0 weights are not supported by this backend yet"));
}

absl::Status ValidateBlockQuantizedUpload(DType dtype, const void* quants, const void* scales,
                                          int64_t rows, int64_t cols) {
  const std::string what = absl::StrCat("Upload", dtype == DType::kQ4_0 ? "Q4" : "Q8", "Weight");
  if (rows < 0 || cols < 0 || (cols > 0 && rows > std::numeric_limits<int32_t>::max() / cols)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bad shape [", rows, ", ", cols, "]"));
  }
  if (rows * cols > 0 && (quants == nullptr || scales == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": null quants or scales for a [", rows, ", ", cols, "] weight"));
  }
  if (reinterpret_cast<uintptr_t>(scales) % alignof(uint16_t) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": scales are not 2-byte aligned"));
  }
  return absl::OkStatus();
}

absl::Status ValidateStepPlan(const StepPlan& plan) {
  auto error = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("StepPlan: ", parts...));
  };
  const int rows = plan.num_rows();
  if (plan.block_size <= 0) return error("block_size ", plan.block_size, " must be > 0");
  if (plan.positions.size() != plan.tokens.size()) {
    return error("positions has ", plan.positions.size(), " entries for ", rows, " rows");
  }
  if (plan.kv_slots.size() != plan.tokens.size()) {
    return error("kv_slots has ", plan.kv_slots.size(), " entries for ", rows, " rows");
  }
  for (int r = 0; r < rows; ++r) {
    if (plan.tokens[r] < 0) return error("tokens[", r, "] = ", plan.tokens[r], " is negative");
  }
  int next_row = 0;
  for (size_t s = 0; s < plan.sequences.size(); ++s) {
    const StepPlan::Sequence& seq = plan.sequences[s];
    const std::string where = absl::StrCat("sequence ", s, ": ");
    if (seq.row_begin != next_row) {
      return error(where, "row_begin ", seq.row_begin, " should be ", next_row,
                   " (sequences cover the rows in order)");
    }
    if (seq.row_count < 0 || seq.row_count > rows - seq.row_begin) {
      return error(where, "row_count ", seq.row_count, " does not fit in ", rows, " rows");
    }
    next_row += seq.row_count;
    if (seq.context_length < 0) {
      return error(where, "context_length ", seq.context_length, " is negative");
    }
    const int64_t keys = int64_t(seq.context_length) + seq.row_count;
    if (int64_t(seq.block_table.size()) * plan.block_size < keys) {
      return error(where, "block_table of ", seq.block_table.size(), " blocks of ", plan.block_size,
                   " cannot hold ", keys, " keys");
    }
    for (size_t b = 0; b < seq.block_table.size(); ++b) {
      if (seq.block_table[b] < 0) {
        return error(where, "block_table[", b, "] = ", seq.block_table[b], " is negative");
      }
    }
    if (!seq.parents.empty()) {
      if (int(seq.parents.size()) != seq.row_count) {
        return error(where, "parents has ", seq.parents.size(), " entries for ", seq.row_count,
                     " rows");
      }
      for (int i = 0; i < seq.row_count; ++i) {
        if (seq.parents[i] < -1 || seq.parents[i] >= i) {
          return error(where, "parents[", i, "] = ", seq.parents[i], " must be in [-1, ", i, ")");
        }
      }
    }
    for (int i = 0; i < seq.row_count; ++i) {
      const int64_t logical = int64_t(seq.context_length) + i;
      const int64_t slot = int64_t(seq.block_table[logical / plan.block_size]) * plan.block_size +
                           logical % plan.block_size;
      if (plan.kv_slots[seq.row_begin + i] != slot) {
        return error(where, "kv_slots[", seq.row_begin + i,
                     "] = ", plan.kv_slots[seq.row_begin + i], " but logical key ", logical,
                     " lives in slot ", slot);
      }
    }
  }
  if (next_row != rows) {
    return error("sequences cover ", next_row, " of ", rows, " rows");
  }
  for (size_t i = 0; i < plan.logit_rows.size(); ++i) {
    const int32_t r = plan.logit_rows[i];
    if (r < 0 || r >= rows) return error("logit_rows[", i, "] = ", r, " is not a row");
    if (i > 0 && r <= plan.logit_rows[i - 1]) {
      return error("logit_rows must be strictly ascending (logit_rows[", i, "] = ", r, ")");
    }
  }
  return absl::OkStatus();
}

absl::Status Backend::CopyLogitsToHost(const LogitsView& logits, std::vector<float>* row_major,
                                       std::vector<float>* staging) {
  absl::Status status = ValidateLogitsView(logits);
  if (!status.ok()) return status;
  std::vector<float> temporary;
  if (staging == nullptr) staging = &temporary;
  std::vector<float>* host = logits.parts == 1 ? row_major : staging;
  host->resize(size_t(logits.rows) * logits.vocab);
  status = CopyToHost(logits.data, host->data(), host->size() * sizeof(float));
  if (!status.ok() || logits.parts == 1) return status;
  LogitsView host_view = logits;
  host_view.data = host->data();
  return ToRowMajor(host_view, row_major);
}

absl::Status Backend::VerifyAccept(const LogitsView& logits, absl::Span<const VerifyChain> chains,
                                   std::vector<VerifyOutcome>* outcomes) {
  std::vector<float> row_major;
  absl::Status status = CopyLogitsToHost(logits, &row_major);
  if (!status.ok()) return status;
  return HostVerifyAccept(row_major, logits.vocab, chains, outcomes);
}

absl::Status Backend::SampleDrafts(const LogitsView& logits, absl::Span<const DraftRow> drafts,
                                   std::vector<DraftProposal>* proposals) {
  std::vector<float> row_major;
  absl::Status status = CopyLogitsToHost(logits, &row_major);
  if (!status.ok()) return status;
  return HostSampleDrafts(row_major, logits.vocab, drafts, proposals);
}

}  // namespace tandem
