#include "model/weights.h"

#include <glog/logging.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/checkpoint.h"
#include "model/float16.h"
#include "model/q4_0.h"

namespace tandem {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The checkpoint tensor `name`, checked to be f32/f16/bf16 of exactly `shape`, or a
// block-quantized matrix told by its dtype (I8: q8_0 quants [rows, cols]; U8: q4_0
// packed nibbles [rows, Q4BytesPerRow(cols)]) plus its F16 "<name>_scale" tensor.
struct CheckedTensor {
  SafetensorsTensorView view;
  DType dtype = DType::kF32;
  int64_t rows = 1;  // 1 for vectors.
  int64_t cols = 0;
  SafetensorsTensorView scales;  // kQ8_0/kQ4_0 only: F16 [rows, Q8BlocksPerRow(cols)].
  std::string where;             // For error messages.
};

absl::StatusOr<CheckedTensor> CheckTensor(SafetensorsTensorView view, const std::string& where,
                                          const std::vector<int64_t>& shape) {
  CheckedTensor tensor;
  switch (view.dtype) {
    case SafetensorsDType::kF32:
      tensor.dtype = DType::kF32;
      break;
    case SafetensorsDType::kF16:
      tensor.dtype = DType::kF16;
      break;
    case SafetensorsDType::kBF16:
      tensor.dtype = DType::kBF16;
      break;
    case SafetensorsDType::kI8:
    case SafetensorsDType::kU8:
      tensor.dtype = view.dtype == SafetensorsDType::kI8 ? DType::kQ8_0 : DType::kQ4_0;
      if (shape.size() != 2) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": dtype ", SafetensorsDTypeName(view.dtype), " (",
                         DTypeName(tensor.dtype), " quants) is only supported for matrices"));
      }
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": dtype ", SafetensorsDTypeName(view.dtype),
                       " is not supported (expected F32, F16, BF16, I8 for q8_0 or U8 for q4_0)"));
  }
  // q4_0 stores two values per byte: [rows, ceil(cols / 2)].
  const std::vector<int64_t> stored_shape =
      tensor.dtype == DType::kQ4_0 ? std::vector<int64_t>{shape[0], Q4BytesPerRow(shape[1])}
                                   : shape;
  if (view.shape != stored_shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": expected shape ", ShapeString(stored_shape),
        tensor.dtype == DType::kQ4_0 ? absl::StrCat(" (q4_0 packing of ", ShapeString(shape), ")")
                                     : "",
        ", found ", ShapeString(view.shape)));
  }
  tensor.rows = shape.size() == 2 ? shape[0] : 1;
  tensor.cols = shape.back();
  tensor.view = std::move(view);
  tensor.where = where;
  return tensor;
}

// Attaches the scales of a q8_0/q4_0 tensor `name`: "<name>_scale", F16 [rows, blocks].
absl::Status AttachScales(const Checkpoint& checkpoint, const std::string& name,
                          CheckedTensor* tensor) {
  const std::string scale_name = name + "_scale";
  const char* format = DTypeName(tensor->dtype);
  const std::vector<int64_t> shape = {tensor->rows, Q8BlocksPerRow(tensor->cols)};
  auto view = checkpoint.Find(scale_name);
  if (!view.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(tensor->where, " is ", SafetensorsDTypeName(tensor->view.dtype), " (", format,
                     " quants) but its scales \"", scale_name, "\" are missing"));
  }
  if (view->dtype != SafetensorsDType::kF16 || view->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        checkpoint.FileOf(scale_name), ": ", format, " scales \"", scale_name, "\": expected F16 ",
        ShapeString(shape), " (one scale per block of ", kQ8BlockSize, " values of a row), found ",
        SafetensorsDTypeName(view->dtype), " ", ShapeString(view->shape)));
  }
  tensor->scales = *std::move(view);
  return absl::OkStatus();
}

absl::StatusOr<CheckedTensor> GetTensor(const Checkpoint& checkpoint, const std::string& name,
                                        const std::vector<int64_t>& shape) {
  auto view = checkpoint.Find(name);
  if (!view.ok()) return view.status();
  auto tensor = CheckTensor(
      *std::move(view), absl::StrCat(checkpoint.FileOf(name), ": tensor \"", name, "\""), shape);
  if (tensor.ok() && IsBlockQuantized(tensor->dtype)) {
    if (absl::Status status = AttachScales(checkpoint, name, &*tensor); !status.ok()) {
      return status;
    }
  }
  return tensor;
}

std::shared_ptr<uint8_t> Allocate(size_t bytes) {
  // operator new[] aligns to at least alignof(std::max_align_t).
  return std::shared_ptr<uint8_t>(new uint8_t[bytes > 0 ? bytes : 1],
                                  std::default_delete<uint8_t[]>());
}

// An owner keeping both `a` and `b` alive (a q8_0/q4_0 tensor's quants and scales).
std::shared_ptr<const void> BothOwners(std::shared_ptr<const void> a,
                                       std::shared_ptr<const void> b) {
  if (a == b) return a;
  auto both = std::make_shared<std::pair<std::shared_ptr<const void>, std::shared_ptr<const void>>>(
      std::move(a), std::move(b));
  return std::shared_ptr<const void>(both, both.get());
}

// `count` elements of `element_size` bytes at `source`: a view kept alive by `owner`
// when aligned to the element size, else an aligned copy (its owner replaces `owner`).
const void* AlignedView(const void* source, size_t element_size, size_t count,
                        std::shared_ptr<const void>* owner) {
  if (reinterpret_cast<uintptr_t>(source) % element_size == 0) return source;
  auto copy = Allocate(count * element_size);
  std::memcpy(copy.get(), source, count * element_size);
  *owner = std::move(copy);
  return owner->get();
}

// Rows [row_begin, row_begin + row_count) of `tensor`: a view into the mapping, or an
// aligned copy when the file does not align the data to the element size.
HostTensor RowSlice(const CheckedTensor& tensor, int64_t row_begin, int64_t row_count) {
  // Block formats are read byte-wise: no alignment needed for their quants.
  const size_t element_size = IsBlockQuantized(tensor.dtype) ? 1 : DTypeSize(tensor.dtype);
  const size_t row_bytes = StoredRowBytes(tensor.dtype, tensor.cols);
  const auto* source = static_cast<const uint8_t*>(tensor.view.data) + row_begin * row_bytes;
  HostTensor slice;
  slice.dtype = tensor.dtype;
  slice.rows = row_count;
  slice.cols = tensor.cols;
  slice.owner = tensor.view.owner;
  slice.data =
      AlignedView(source, element_size, row_count * row_bytes / element_size, &slice.owner);
  if (IsBlockQuantized(tensor.dtype)) {
    const int64_t blocks = Q8BlocksPerRow(tensor.cols);
    std::shared_ptr<const void> scales_owner = tensor.scales.owner;
    slice.scales =
        AlignedView(static_cast<const uint16_t*>(tensor.scales.data) + row_begin * blocks,
                    sizeof(uint16_t), row_count * blocks, &scales_owner);
    slice.owner = BothOwners(std::move(slice.owner), std::move(scales_owner));
  }
  return slice;
}

// Copies bytes [begin, begin + count) of each of `rows` rows of `row_bytes` bytes into
// owned memory.
std::shared_ptr<uint8_t> CopyColumns(const void* source, int64_t rows, int64_t row_bytes,
                                     int64_t begin, int64_t count) {
  auto copy = Allocate(rows * count);
  for (int64_t row = 0; row < rows; ++row) {
    std::memcpy(copy.get() + row * count,
                static_cast<const uint8_t*>(source) + row * row_bytes + begin, count);
  }
  return copy;
}

// Columns [col_begin, col_begin + col_count) of every row, copied into owned memory
// (a view when the slice is the whole tensor). A q8_0/q4_0 slice must cut on block
// boundaries (INVALID_ARGUMENT otherwise); its blocks are copied whole (a q4_0 block
// of 32 values is 16 bytes, the row's short last block ends the row either way).
absl::StatusOr<HostTensor> ColumnSlice(const CheckedTensor& tensor, int64_t col_begin,
                                       int64_t col_count) {
  if (col_begin == 0 && col_count == tensor.cols) return RowSlice(tensor, 0, tensor.rows);
  const bool blocks = IsBlockQuantized(tensor.dtype);
  if (blocks && (col_begin % kQ8BlockSize != 0 ||
                 (col_count % kQ8BlockSize != 0 && col_begin + col_count != tensor.cols))) {
    return absl::InvalidArgumentError(
        absl::StrCat(tensor.where, ": the tensor-parallel column slice [", col_begin, ", ",
                     col_begin + col_count, ") does not cut ", DTypeName(tensor.dtype),
                     " rows on blocks of ", kQ8BlockSize, " values"));
  }
  HostTensor slice;
  slice.dtype = tensor.dtype;
  slice.rows = tensor.rows;
  slice.cols = col_count;
  // Byte offsets: col_begin is a block boundary for the block formats.
  auto copy =
      CopyColumns(tensor.view.data, tensor.rows, StoredRowBytes(tensor.dtype, tensor.cols),
                  StoredRowBytes(tensor.dtype, col_begin), StoredRowBytes(tensor.dtype, col_count));
  slice.data = copy.get();
  slice.owner = std::move(copy);
  if (!blocks) return slice;
  auto scales = CopyColumns(tensor.scales.data, tensor.rows, Q8BlocksPerRow(tensor.cols) * 2,
                            col_begin / kQ8BlockSize * 2, Q8BlocksPerRow(col_count) * 2);
  slice.scales = scales.get();
  slice.owner = BothOwners(std::move(slice.owner), std::move(scales));
  return slice;
}

absl::Status CheckTensorParallel(const LlamaConfig& config, const std::string& source, int tp_rank,
                                 int tp_size) {
  if (tp_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor parallel size must be at least 1, got ", tp_size));
  }
  if (tp_rank < 0 || tp_rank >= tp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor parallel rank ", tp_rank, " is outside [0, ", tp_size, ")"));
  }
  if (config.num_kv_heads % tp_size != 0 && tp_size % config.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": num_key_value_heads (", config.num_kv_heads,
                     ") must be divisible by the tensor parallel size ", tp_size,
                     ", or the size by it (then each rank holds one replicated KV head)"));
  }
  const std::pair<const char*, int> dimensions[] = {
      {"num_attention_heads", config.num_heads},
      {"intermediate_size", config.intermediate_size},
      {"vocab_size", config.vocab_size},
  };
  for (const auto& [field, value] : dimensions) {
    if (value % tp_size != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", field, " (", value,
                       ") is not divisible by the tensor parallel size ", tp_size));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LayerWeights> LoadLayer(const Checkpoint& checkpoint, const LlamaConfig& config,
                                       int layer, int tp_rank, int tp_size) {
  const std::string prefix = absl::StrCat("model.layers.", layer, ".");
  const int64_t hidden = config.hidden_size;
  const int64_t q_rows = static_cast<int64_t>(config.num_heads) * config.head_dim;
  const int64_t kv_rows = static_cast<int64_t>(config.num_kv_heads) * config.head_dim;
  const int64_t mlp_rows = config.intermediate_size;
  LayerWeights weights;
  struct Spec {
    const char* name;
    std::vector<int64_t> shape;
    HostTensor* out;
    enum { kReplicated, kColumnParallel, kKvHeads, kRowParallel } split;
  };
  const Spec specs[] = {
      {"input_layernorm.weight", {hidden}, &weights.input_norm, Spec::kReplicated},
      {"post_attention_layernorm.weight", {hidden}, &weights.post_attn_norm, Spec::kReplicated},
      {"self_attn.q_proj.weight", {q_rows, hidden}, &weights.q_proj, Spec::kColumnParallel},
      {"self_attn.k_proj.weight", {kv_rows, hidden}, &weights.k_proj, Spec::kKvHeads},
      {"self_attn.v_proj.weight", {kv_rows, hidden}, &weights.v_proj, Spec::kKvHeads},
      {"self_attn.o_proj.weight", {hidden, q_rows}, &weights.o_proj, Spec::kRowParallel},
      {"mlp.gate_proj.weight", {mlp_rows, hidden}, &weights.gate_proj, Spec::kColumnParallel},
      {"mlp.up_proj.weight", {mlp_rows, hidden}, &weights.up_proj, Spec::kColumnParallel},
      {"mlp.down_proj.weight", {hidden, mlp_rows}, &weights.down_proj, Spec::kRowParallel},
  };
  for (const Spec& spec : specs) {
    auto tensor = GetTensor(checkpoint, prefix + spec.name, spec.shape);
    if (!tensor.ok()) return tensor.status();
    switch (spec.split) {
      case Spec::kReplicated:
        *spec.out = RowSlice(*tensor, 0, tensor->rows);
        break;
      case Spec::kColumnParallel: {
        // Output rows of this rank's heads (head-major rows) or MLP units.
        const int64_t rows = tensor->rows / tp_size;
        *spec.out = RowSlice(*tensor, tp_rank * rows, rows);
        break;
      }
      case Spec::kKvHeads: {
        // This rank's KV heads (or its one replicated head).
        const int64_t rows = int64_t(LocalKvHeads(config, tp_size)) * config.head_dim;
        const int64_t first = int64_t(FirstKvHead(config, tp_rank, tp_size)) * config.head_dim;
        *spec.out = RowSlice(*tensor, first, rows);
        break;
      }
      case Spec::kRowParallel: {
        const int64_t cols = tensor->cols / tp_size;
        auto slice = ColumnSlice(*tensor, tp_rank * cols, cols);
        if (!slice.ok()) return slice.status();
        *spec.out = *std::move(slice);
        break;
      }
    }
  }
  return weights;
}

}  // namespace

int LocalKvHeads(const LlamaConfig& config, int tp_size) {
  return tp_size > config.num_kv_heads ? 1 : config.num_kv_heads / tp_size;
}

int FirstKvHead(const LlamaConfig& config, int tp_rank, int tp_size) {
  if (tp_size > config.num_kv_heads) return tp_rank / (tp_size / config.num_kv_heads);
  return tp_rank * LocalKvHeads(config, tp_size);
}

float HostTensor::At(int64_t i, int64_t j) const {
  CHECK(i >= 0 && i < rows && j >= 0 && j < cols)
      << "HostTensor::At(" << i << ", " << j << ") outside [" << rows << ", " << cols << "]";
  const int64_t index = i * cols + j;
  switch (dtype) {
    case DType::kF32: {
      float value;
      std::memcpy(&value, static_cast<const uint8_t*>(data) + index * 4, 4);
      return value;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t bits;
      std::memcpy(&bits, static_cast<const uint8_t*>(data) + index * 2, 2);
      return dtype == DType::kF16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
    }
    case DType::kQ8_0:
    case DType::kQ4_0: {
      const auto* block_scales = static_cast<const uint16_t*>(scales);
      const int quant =
          dtype == DType::kQ8_0
              ? static_cast<const int8_t*>(data)[index]
              : Q4QuantAt(static_cast<const uint8_t*>(data) + i * Q4BytesPerRow(cols), cols, j);
      return float(quant) * HalfToFloat(block_scales[i * Q8BlocksPerRow(cols) + j / kQ8BlockSize]);
    }
  }
  return std::numeric_limits<float>::quiet_NaN();
}

absl::StatusOr<HostTensor> WholeTensor(SafetensorsTensorView view, const std::string& where,
                                       const std::vector<int64_t>& shape) {
  absl::StatusOr<CheckedTensor> tensor = CheckTensor(std::move(view), where, shape);
  if (!tensor.ok()) return tensor.status();
  if (IsBlockQuantized(tensor->dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", DTypeName(tensor->dtype), " is not supported here"));
  }
  return RowSlice(*tensor, 0, tensor->rows);
}

absl::StatusOr<LlamaWeights> LoadLlamaWeights(const std::string& model_dir, int tp_rank,
                                              int tp_size) {
  auto config = LoadLlamaConfig(model_dir);
  if (!config.ok()) return config.status();
  if (auto status = CheckTensorParallel(*config, model_dir + "/config.json", tp_rank, tp_size);
      !status.ok()) {
    return status;
  }
  auto checkpoint = Checkpoint::Open(model_dir);
  if (!checkpoint.ok()) return checkpoint.status();

  LlamaWeights weights;
  weights.config = *config;
  weights.tp_rank = tp_rank;
  weights.tp_size = tp_size;
  const int64_t vocab = config->vocab_size, hidden = config->hidden_size;
  auto embed = GetTensor(*checkpoint, "model.embed_tokens.weight", {vocab, hidden});
  if (!embed.ok()) return embed.status();
  weights.embed_tokens = RowSlice(*embed, 0, vocab);
  auto norm = GetTensor(*checkpoint, "model.norm.weight", {hidden});
  if (!norm.ok()) return norm.status();
  weights.final_norm = RowSlice(*norm, 0, 1);

  const int64_t vocab_rows = vocab / tp_size;
  weights.vocab_begin = tp_rank * vocab_rows;
  if (config->tie_word_embeddings) {
    weights.lm_head = RowSlice(*embed, weights.vocab_begin, vocab_rows);
  } else {
    auto head = GetTensor(*checkpoint, "lm_head.weight", {vocab, hidden});
    if (!head.ok()) return head.status();
    weights.lm_head = RowSlice(*head, weights.vocab_begin, vocab_rows);
  }

  weights.layers.reserve(config->num_layers);
  for (int layer = 0; layer < config->num_layers; ++layer) {
    auto layer_weights = LoadLayer(*checkpoint, *config, layer, tp_rank, tp_size);
    if (!layer_weights.ok()) return layer_weights.status();
    weights.layers.push_back(*std::move(layer_weights));
  }
  return weights;
}

}  // namespace tandem
