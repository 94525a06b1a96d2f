// LlamaModel construction: shape checks, weight upload and KV cache allocation.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/llama.h"

namespace tandem {
namespace {

absl::Status CheckShape(const HostTensor& t, int64_t rows, int64_t cols, const std::string& name) {
  if (t.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel: weight ", name, " is missing"));
  }
  if (t.rows != rows || t.cols != cols) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel: weight ", name, " is [", t.rows,
                                                   ", ", t.cols, "], expected [", rows, ", ", cols,
                                                   "]"));
  }
  return absl::OkStatus();
}

}  // namespace

LlamaModel::LlamaModel(Backend* backend, Communicator* comm, const LlamaModelOptions& options,
                       KvCache cache)
    : backend_(backend), comm_(comm), options_(options), cache_(std::move(cache)) {}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(const LlamaWeights& weights,
                                                               Backend* backend, Communicator* comm,
                                                               const LlamaModelOptions& options) {
  if (backend == nullptr) return absl::InvalidArgumentError("LlamaModel: backend is null");
  const LlamaConfig& c = weights.config;
  const int tp = weights.tp_size;
  if (tp < 1 || weights.tp_rank < 0 || weights.tp_rank >= tp) {
    return absl::InvalidArgumentError(
        absl::StrCat("LlamaModel: bad tensor-parallel rank ", weights.tp_rank, " of ", tp));
  }
  if (comm != nullptr && comm->size() == 1) comm = nullptr;
  if (tp > 1 && (comm == nullptr || comm->size() != tp || comm->rank() != weights.tp_rank)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LlamaModel: weights are rank ", weights.tp_rank, " of ", tp, " but the communicator is ",
        comm == nullptr ? std::string("absent")
                        : absl::StrCat("rank ", comm->rank(), " of ", comm->size())));
  }
  if (tp == 1 && comm != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LlamaModel: weights are unsharded but the communicator has ", comm->size(), " ranks"));
  }
  if (c.vocab_size < 1 || c.hidden_size < 1 || c.num_layers < 1 || c.num_heads < 1 ||
      c.num_kv_heads < 1 || c.head_dim < 2 || c.head_dim % 2 != 0 || c.intermediate_size < 1 ||
      c.max_position_embeddings < 1) {
    return absl::InvalidArgumentError("LlamaModel: config has non-positive dimensions");
  }
  if (c.num_heads % tp != 0 || (c.num_kv_heads % tp != 0 && tp % c.num_kv_heads != 0) ||
      c.vocab_size % tp != 0 || c.intermediate_size % tp != 0 ||
      c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LlamaModel: heads ", c.num_heads, ", vocab ", c.vocab_size,
                     " and intermediate size ", c.intermediate_size, " must divide by tp ", tp,
                     ", KV heads ", c.num_kv_heads, " by tp or tp by them, and heads by KV heads"));
  }
  if (options.block_size < 1 || options.max_batch_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel: block_size (", options.block_size,
                                                   ") and max_batch_tokens (",
                                                   options.max_batch_tokens, ") must be >= 1"));
  }
  const int kv_local = LocalKvHeads(c, tp);  // Replicated when tp > KV heads.
  if (IsBlockQuantized(options.kv_dtype) || !backend->SupportsKvDType(options.kv_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel: the ", backend->name(),
                                                   " backend does not keep a ",
                                                   DTypeName(options.kv_dtype), " KV cache"));
  }
  const size_t per_block = KvBytesPerBlock(c.num_layers, options.block_size, kv_local, c.head_dim,
                                           DTypeSize(options.kv_dtype));
  auto cache = KvCache::ForBudget(options.kv_cache_bytes, per_block, options.block_size);
  if (!cache.ok()) return cache.status();

  std::unique_ptr<LlamaModel> model(new LlamaModel(backend, comm, options, *std::move(cache)));
  model->config_ = c;
  model->tp_rank_ = weights.tp_rank;
  model->tp_size_ = tp;
  model->heads_local_ = c.num_heads / tp;
  model->kv_heads_local_ = kv_local;
  model->intermediate_local_ = c.intermediate_size / tp;
  model->vocab_local_ = c.vocab_size / tp;
  if (weights.vocab_begin != int64_t(weights.tp_rank) * model->vocab_local_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LlamaModel: rank ", weights.tp_rank, " lm_head slice starts at ", weights.vocab_begin,
        ", expected ", int64_t(weights.tp_rank) * model->vocab_local_));
  }
  model->inv_freq_ = RopeInverseFrequencies(c);
  if (static_cast<int>(model->inv_freq_.size()) != c.head_dim / 2) {
    return absl::InvalidArgumentError("LlamaModel: RoPE frequencies do not match head_dim");
  }
  absl::Status status = model->UploadWeights(weights);
  if (!status.ok()) return status;
  status = model->AllocateKv();
  if (!status.ok()) return status;
  return model;
}

absl::StatusOr<Weight> UploadHostTensor(Backend* backend, const HostTensor& t) {
  switch (t.dtype) {
    case DType::kQ8_0:
      return backend->UploadQ8Weight(t.data, t.scales, t.rows, t.cols, t.owner);
    case DType::kQ4_0:
      return backend->UploadQ4Weight(t.data, t.scales, t.rows, t.cols, t.owner);
    default:
      return backend->UploadWeight(t.data, t.dtype, t.rows, t.cols, t.owner);
  }
}

absl::Status LlamaModel::UploadWeights(const LlamaWeights& w) {
  const LlamaConfig& c = config_;
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  auto upload = [&](const HostTensor& t, int64_t rows, int64_t cols, const std::string& name,
                    Weight* out) -> absl::Status {
    absl::Status status = CheckShape(t, rows, cols, name);
    if (!status.ok()) return status;
    auto weight = UploadHostTensor(backend_, t);
    if (!weight.ok()) {
      return absl::Status(weight.status().code(), absl::StrCat("LlamaModel: uploading ", name, ": ",
                                                               weight.status().message()));
    }
    *out = *std::move(weight);
    return absl::OkStatus();
  };
  TANDEM_RETURN_IF_ERROR(
      upload(w.embed_tokens, c.vocab_size, hidden, "embed_tokens", &embed_tokens_));
  TANDEM_RETURN_IF_ERROR(upload(w.final_norm, 1, hidden, "norm", &final_norm_));
  TANDEM_RETURN_IF_ERROR(upload(w.lm_head, vocab_local_, hidden, "lm_head", &lm_head_));
  if (static_cast<int>(w.layers.size()) != c.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("LlamaModel: ", w.layers.size(), " layers given, config says ", c.num_layers));
  }
  layers_.resize(c.num_layers);
  const int64_t q_rows = heads_local_ * hd, kv_rows = kv_heads_local_ * hd;
  const int64_t inter = intermediate_local_;
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerWeights& lw = w.layers[i];
    Layer& l = layers_[i];
    const std::string p = absl::StrCat("layers.", i, ".");
    TANDEM_RETURN_IF_ERROR(upload(lw.input_norm, 1, hidden, p + "input_layernorm", &l.input_norm));
    TANDEM_RETURN_IF_ERROR(upload(lw.q_proj, q_rows, hidden, p + "q_proj", &l.q_proj));
    TANDEM_RETURN_IF_ERROR(upload(lw.k_proj, kv_rows, hidden, p + "k_proj", &l.k_proj));
    TANDEM_RETURN_IF_ERROR(upload(lw.v_proj, kv_rows, hidden, p + "v_proj", &l.v_proj));
    TANDEM_RETURN_IF_ERROR(upload(lw.o_proj, hidden, q_rows, p + "o_proj", &l.o_proj));
    TANDEM_RETURN_IF_ERROR(
        upload(lw.post_attn_norm, 1, hidden, p + "post_attention_layernorm", &l.post_attn_norm));
    TANDEM_RETURN_IF_ERROR(upload(lw.gate_proj, inter, hidden, p + "gate_proj", &l.gate_proj));
    TANDEM_RETURN_IF_ERROR(upload(lw.up_proj, inter, hidden, p + "up_proj", &l.up_proj));
    TANDEM_RETURN_IF_ERROR(upload(lw.down_proj, hidden, inter, p + "down_proj", &l.down_proj));
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::AllocateKv() {
  kv_layout_.num_blocks = cache_.total_blocks();
  kv_layout_.block_size = cache_.block_size();
  kv_layout_.num_kv_heads = kv_heads_local_;
  kv_layout_.head_dim = config_.head_dim;
  kv_layout_.dtype = options_.kv_dtype;
  for (int i = 0; i < config_.num_layers; ++i) {
    auto k = backend_->Allocate(kv_layout_.BytesPerTensor());
    if (!k.ok()) return k.status();
    auto v = backend_->Allocate(kv_layout_.BytesPerTensor());
    if (!v.ok()) return v.status();
    k_cache_.push_back(*std::move(k));
    v_cache_.push_back(*std::move(v));
  }
  return absl::OkStatus();
}

}  // namespace tandem
