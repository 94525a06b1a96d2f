#include "model/weights.h"

#include <glog/logging.h>

#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/checkpoint.h"
#include "model/float16.h"

namespace tandem {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The checkpoint tensor `name`, checked to be f32/f16/bf16 of exactly `shape`.
struct CheckedTensor {
  SafetensorsTensorView view;
  DType dtype = DType::kF32;
  int64_t rows = 1;  // 1 for vectors.
  int64_t cols = 0;
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
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": dtype ", SafetensorsDTypeName(view.dtype),
                       " is not supported (expected F32, F16 or BF16)"));
  }
  if (view.shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected shape ", ShapeString(shape),
                                                   ", found ", ShapeString(view.shape)));
  }
  tensor.rows = shape.size() == 2 ? shape[0] : 1;
  tensor.cols = shape.back();
  tensor.view = std::move(view);
  return tensor;
}

absl::StatusOr<CheckedTensor> GetTensor(const Checkpoint& checkpoint, const std::string& name,
                                        const std::vector<int64_t>& shape) {
  auto view = checkpoint.Find(name);
  if (!view.ok()) return view.status();
  return CheckTensor(*std::move(view),
                     absl::StrCat(checkpoint.FileOf(name), ": tensor \"", name, "\""), shape);
}

std::shared_ptr<uint8_t> Allocate(size_t bytes) {
  // operator new[] aligns to at least alignof(std::max_align_t).
  return std::shared_ptr<uint8_t>(new uint8_t[bytes > 0 ? bytes : 1],
                                  std::default_delete<uint8_t[]>());
}

// Rows [row_begin, row_begin + row_count) of `tensor`: a view into the mapping, or an
// aligned copy when the file does not align the data to the element size.
HostTensor RowSlice(const CheckedTensor& tensor, int64_t row_begin, int64_t row_count) {
  const size_t element_size = DTypeSize(tensor.dtype);
  const size_t row_bytes = static_cast<size_t>(tensor.cols) * element_size;
  const auto* source = static_cast<const uint8_t*>(tensor.view.data) + row_begin * row_bytes;
  HostTensor slice;
  slice.dtype = tensor.dtype;
  slice.rows = row_count;
  slice.cols = tensor.cols;
  if (reinterpret_cast<uintptr_t>(source) % element_size == 0) {
    slice.data = source;
    slice.owner = tensor.view.owner;
    return slice;
  }
  auto copy = Allocate(row_count * row_bytes);
  std::memcpy(copy.get(), source, row_count * row_bytes);
  slice.data = copy.get();
  slice.owner = std::move(copy);
  return slice;
}

// Columns [col_begin, col_begin + col_count) of every row, copied into owned memory
// (a view when the slice is the whole tensor).
HostTensor ColumnSlice(const CheckedTensor& tensor, int64_t col_begin, int64_t col_count) {
  if (col_begin == 0 && col_count == tensor.cols) return RowSlice(tensor, 0, tensor.rows);
  const size_t element_size = DTypeSize(tensor.dtype);
  const size_t source_row_bytes = static_cast<size_t>(tensor.cols) * element_size;
  const size_t slice_row_bytes = static_cast<size_t>(col_count) * element_size;
  auto copy = Allocate(tensor.rows * slice_row_bytes);
  const auto* source = static_cast<const uint8_t*>(tensor.view.data);
  for (int64_t row = 0; row < tensor.rows; ++row) {
    std::memcpy(copy.get() + row * slice_row_bytes,
                source + row * source_row_bytes + col_begin * element_size, slice_row_bytes);
  }
  HostTensor slice;
  slice.dtype = tensor.dtype;
  slice.rows = tensor.rows;
  slice.cols = col_count;
  slice.data = copy.get();
  slice.owner = std::move(copy);
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
        *spec.out = ColumnSlice(*tensor, tp_rank * cols, cols);
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
  }
  return std::numeric_limits<float>::quiet_NaN();
}

absl::StatusOr<HostTensor> WholeTensor(SafetensorsTensorView view, const std::string& where,
                                       const std::vector<int64_t>& shape) {
  absl::StatusOr<CheckedTensor> tensor = CheckTensor(std::move(view), where, shape);
  if (!tensor.ok()) return tensor.status();
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
