#include "model/weight_format.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/float16.h"
#include "model/q4_0.h"
#include "model/q8_0.h"

namespace tandem {
namespace {

// The linear matrices of `w` (LlamaWeights or const LlamaWeights).
template <typename Weights>
auto LinearTensors(Weights* w) {
  std::vector<decltype(&w->lm_head)> tensors = {&w->lm_head};
  for (auto& l : w->layers) {
    for (auto* t :
         {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) {
      tensors.push_back(t);
    }
  }
  return tensors;
}

int64_t TensorBytes(const HostTensor& t) {
  int64_t bytes = t.rows * StoredRowBytes(t.dtype, t.cols);
  if (IsBlockQuantized(t.dtype)) bytes += t.rows * Q8BlocksPerRow(t.cols) * 2;
  return bytes;
}

// `source` converted into one owned buffer.
HostTensor Convert(const HostTensor& source, DType format) {
  HostTensor out{nullptr, format, source.rows, source.cols, nullptr};
  const int64_t rows = source.rows, cols = source.cols;
  // q8_0/q4_0: quants, then the scales at the next 64-byte boundary (aligned for uint16_t).
  const int64_t row_bytes = StoredRowBytes(format, cols);
  const int64_t scales_offset = (rows * row_bytes + 63) / 64 * 64;
  const bool blocks = IsBlockQuantized(format);
  const int64_t bytes = blocks ? scales_offset + rows * Q8BlocksPerRow(cols) * 2 : TensorBytes(out);
  auto buffer = std::shared_ptr<uint8_t>(new uint8_t[std::max<int64_t>(1, bytes)],
                                         std::default_delete<uint8_t[]>());
  std::vector<float> row(cols);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) row[j] = source.At(i, j);
    uint8_t* dst = buffer.get() + i * row_bytes;
    auto* scales =
        reinterpret_cast<uint16_t*>(buffer.get() + scales_offset) + i * Q8BlocksPerRow(cols);
    switch (format) {
      case DType::kF32:
        std::memcpy(dst, row.data(), cols * 4);
        break;
      case DType::kF16:
      case DType::kBF16:
        for (int64_t j = 0; j < cols; ++j) {
          const uint16_t bits =
              format == DType::kF16 ? FloatToHalf(row[j]) : FloatToBFloat16(row[j]);
          std::memcpy(dst + 2 * j, &bits, 2);
        }
        break;
      case DType::kQ8_0:
        QuantizeQ8Row(row.data(), cols, reinterpret_cast<int8_t*>(dst), scales);
        break;
      case DType::kQ4_0:
        QuantizeQ4Row(row.data(), cols, dst, scales);
        break;
    }
  }
  out.data = buffer.get();
  if (blocks) out.scales = buffer.get() + scales_offset;
  out.owner = std::move(buffer);
  return out;
}

}  // namespace

absl::StatusOr<DType> ParseWeightFormat(const std::string& name) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    if (name == DTypeName(dtype)) return dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown weight format \"", name, "\" (f32, f16, bf16, q8_0 or q4_0)"));
}

absl::StatusOr<LlamaWeights> ConvertLinearWeights(const LlamaWeights& weights, DType format) {
  LlamaWeights out = weights;
  try {
    for (HostTensor* t : LinearTensors(&out)) *t = Convert(*t, format);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate the weights in ", DTypeName(format)));
  }
  return out;
}

int64_t WeightBytes(const LlamaWeights& weights) {
  int64_t bytes = TensorBytes(weights.embed_tokens) + TensorBytes(weights.final_norm);
  for (const HostTensor* t : LinearTensors(&weights)) bytes += TensorBytes(*t);
  for (const LayerWeights& l : weights.layers) {
    bytes += TensorBytes(l.input_norm) + TensorBytes(l.post_attn_norm);
  }
  return bytes;
}

}  // namespace tandem
