#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

absl::Status CheckShape(const HostTensor& t, int64_t rows, int64_t cols,
                        const std::string& name) {
  if (t.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel: weight ", name, " is missing"));
  }
  if (t.rows != rows || t.cols != cols) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel: weight ", name, " is [",
                                                   t.rows, ", ", t.cols, "], expected [",
                                                   rows, ", ", cols, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Buffer> AllocateFloats(Backend* backend, size_t count) {
  return backend->Allocate(std::max<size_t>(count, 1) * sizeof(float));
}

}  // namespace

LlamaModel::LlamaModel(Backend* backend, Communicator* comm,
                       const LlamaModelOptions& options, KvCache cache)
    : backend_(backend), comm_(comm), options_(options), cache_(std::move(cache)) {}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(
    const LlamaWeights& weights, Backend* backend, Communicator* comm,
    const LlamaModelOptions& options) {
  if (backend == nullptr) return absl::InvalidArgumentError("LlamaModel: backend is null");
  const LlamaConfig& c = weights.config;
  const int tp = weights.tp_size;
  if (tp < 1 || weights.tp_rank < 0 || weights.tp_rank >= tp) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel: bad tensor-parallel rank ",
                                                   weights.tp_rank, " of ", tp));
  }
  if (comm != nullptr && comm->size() == 1) comm = nullptr;
  if (tp > 1 && (comm == nullptr || comm->size() != tp || comm->rank() != weights.tp_rank)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LlamaModel: weights are rank ", weights.tp_rank, " of ", tp,
        " but the communicator is ",
        comm == nullptr ? std::string("absent")
                        : absl::StrCat("rank ", comm->rank(), " of ", comm->size())));
  }
  if (tp == 1 && comm != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LlamaModel: weights are unsharded but the communicator has ", comm->size(),
        " ranks"));
  }
  if (c.vocab_size < 1 || c.hidden_size < 1 || c.num_layers < 1 || c.num_heads < 1 ||
      c.num_kv_heads < 1 || c.head_dim < 2 || c.head_dim % 2 != 0 ||
      c.intermediate_size < 1 || c.max_position_embeddings < 1) {
    return absl::InvalidArgumentError("LlamaModel: config has non-positive dimensions");
  }
  if (c.num_heads % tp != 0 || (c.num_kv_heads % tp != 0 && tp % c.num_kv_heads != 0) ||
      c.vocab_size % tp != 0 || c.intermediate_size % tp != 0 ||
      c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LlamaModel: heads ", c.num_heads, ", vocab ", c.vocab_size,
        " and intermediate size ", c.intermediate_size, " must divide by tp ", tp,
        ", KV heads ", c.num_kv_heads, " by tp or tp by them, and heads by KV heads"));
  }
  if (options.block_size < 1 || options.max_batch_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LlamaModel: block_size (", options.block_size, ") and max_batch_tokens (",
        options.max_batch_tokens, ") must be >= 1"));
  }
  const int kv_local = LocalKvHeads(c, tp);  // Replicated when tp > KV heads.
  const size_t per_block =
      KvBytesPerBlock(c.num_layers, options.block_size, kv_local, c.head_dim);
  auto cache = KvCache::ForBudget(options.kv_cache_bytes, per_block, options.block_size);
  if (!cache.ok()) return cache.status();

  std::unique_ptr<LlamaModel> model(
      new LlamaModel(backend, comm, options, *std::move(cache)));
  model->config_ = c;
  model->tp_rank_ = weights.tp_rank;
  model->tp_size_ = tp;
  model->heads_local_ = c.num_heads / tp;
  model->kv_heads_local_ = kv_local;
  model->intermediate_local_ = c.intermediate_size / tp;
  model->vocab_local_ = c.vocab_size / tp;
  if (weights.vocab_begin != int64_t(weights.tp_rank) * model->vocab_local_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LlamaModel: rank ", weights.tp_rank, " lm_head slice starts at ",
        weights.vocab_begin, ", expected ", int64_t(weights.tp_rank) * model->vocab_local_));
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

absl::Status LlamaModel::UploadWeights(const LlamaWeights& w) {
  const LlamaConfig& c = config_;
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  auto upload = [&](const HostTensor& t, int64_t rows, int64_t cols,
                    const std::string& name, Weight* out) -> absl::Status {
    absl::Status status = CheckShape(t, rows, cols, name);
    if (!status.ok()) return status;
    auto weight = backend_->UploadWeight(t.data, t.dtype, t.rows, t.cols, t.owner);
    if (!weight.ok()) {
      return absl::Status(weight.status().code(),
                          absl::StrCat("LlamaModel: uploading ", name, ": ",
                                       weight.status().message()));
    }
    *out = *std::move(weight);
    return absl::OkStatus();
  };
#define TANDEM_RETURN_IF_ERROR(expr)         \
  do {                                       \
    absl::Status _status = (expr);           \
    if (!_status.ok()) return _status;       \
  } while (0)
  TANDEM_RETURN_IF_ERROR(upload(w.embed_tokens, c.vocab_size, hidden, "embed_tokens",
                                &embed_tokens_));
  TANDEM_RETURN_IF_ERROR(upload(w.final_norm, 1, hidden, "norm", &final_norm_));
  TANDEM_RETURN_IF_ERROR(upload(w.lm_head, vocab_local_, hidden, "lm_head", &lm_head_));
  if (static_cast<int>(w.layers.size()) != c.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel: ", w.layers.size(),
                                                   " layers given, config says ",
                                                   c.num_layers));
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
    TANDEM_RETURN_IF_ERROR(upload(lw.post_attn_norm, 1, hidden,
                                  p + "post_attention_layernorm", &l.post_attn_norm));
    TANDEM_RETURN_IF_ERROR(upload(lw.gate_proj, inter, hidden, p + "gate_proj", &l.gate_proj));
    TANDEM_RETURN_IF_ERROR(upload(lw.up_proj, inter, hidden, p + "up_proj", &l.up_proj));
    TANDEM_RETURN_IF_ERROR(upload(lw.down_proj, hidden, inter, p + "down_proj", &l.down_proj));
  }
#undef TANDEM_RETURN_IF_ERROR
  return absl::OkStatus();
}

absl::Status LlamaModel::AllocateKv() {
  kv_layout_.num_blocks = cache_.total_blocks();
  kv_layout_.block_size = cache_.block_size();
  kv_layout_.num_kv_heads = kv_heads_local_;
  kv_layout_.head_dim = config_.head_dim;
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

absl::Status LlamaModel::EnsureScratch(int rows, int logit_rows) {
  const size_t hidden = config_.hidden_size, hd = config_.head_dim;
  if (rows > scratch_rows_) {
    const size_t n = std::max(rows, std::min(options_.max_batch_tokens, 2 * scratch_rows_));
    struct Item {
      Buffer* buffer;
      size_t width;
    };
    const Item items[] = {
        {&x_, hidden},          {&normed_, hidden},
        {&q_, heads_local_ * hd}, {&k_, kv_heads_local_ * hd},
        {&v_, kv_heads_local_ * hd}, {&attn_, heads_local_ * hd},
        {&proj_, hidden},       {&gate_, size_t(intermediate_local_)},
        {&up_, size_t(intermediate_local_)}, {&act_, size_t(intermediate_local_)},
    };
    for (const Item& item : items) {
      auto buffer = AllocateFloats(backend_, n * item.width);
      if (!buffer.ok()) return buffer.status();
      *item.buffer = *std::move(buffer);
    }
    scratch_rows_ = static_cast<int>(n);
  }
  if (logit_rows > scratch_logit_rows_) {
    const size_t n = std::max(logit_rows, std::min(options_.max_batch_tokens,
                                                   2 * scratch_logit_rows_));
    auto in = AllocateFloats(backend_, n * hidden);
    if (!in.ok()) return in.status();
    auto normed = AllocateFloats(backend_, n * hidden);
    if (!normed.ok()) return normed.status();
    auto local = AllocateFloats(backend_, n * vocab_local_);
    if (!local.ok()) return local.status();
    logit_in_ = *std::move(in);
    logit_normed_ = *std::move(normed);
    logits_local_ = *std::move(local);
    if (tp_size_ > 1) {
      auto gathered = AllocateFloats(backend_, n * config_.vocab_size);
      if (!gathered.ok()) return gathered.status();
      logits_gathered_ = *std::move(gathered);
      host_gathered_.resize(n * config_.vocab_size);
    }
    scratch_logit_rows_ = static_cast<int>(n);
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::Validate(const std::vector<SequenceInput>& batch) {
  if (batch.empty()) return absl::InvalidArgumentError("Forward: empty batch");
  seen_ids_.clear();
  int64_t total_rows = 0;
  int64_t net_blocks = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& in = batch[s];
    // Built only on error paths.
    const auto where = [&]() {
      return absl::StrCat("Forward: sequence ", in.seq_id, " (batch entry ", s, ")");
    };
    if (!seen_ids_.insert(in.seq_id).second) {
      return absl::InvalidArgumentError(absl::StrCat(where(), " appears twice in the batch"));
    }
    const int n = static_cast<int>(in.tokens.size());
    if (n == 0) return absl::InvalidArgumentError(absl::StrCat(where(), ": no tokens"));
    total_rows += n;
    for (int i = 0; i < n; ++i) {
      if (in.tokens[i] < 0 || in.tokens[i] >= config_.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(where(), ": token ", in.tokens[i],
                                                       " at index ", i, " is outside [0, ",
                                                       config_.vocab_size, ")"));
      }
    }
    const bool known = cache_.Contains(in.seq_id);
    const int cached = known ? *cache_.Length(in.seq_id) : 0;
    if (in.start_position < 0 || in.start_position > cached) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": start_position ",
                                                     in.start_position, " but ", cached,
                                                     " tokens are cached"));
    }
    int max_depth = n - 1;
    if (!in.parents.empty()) {
      if (static_cast<int>(in.parents.size()) != n) {
        return absl::InvalidArgumentError(absl::StrCat(where(), ": ", in.parents.size(),
                                                       " parents for ", n, " tokens"));
      }
      depth_.resize(n);
      max_depth = 0;
      for (int i = 0; i < n; ++i) {
        const int p = in.parents[i];
        if (p < -1 || p >= i) {
          return absl::InvalidArgumentError(absl::StrCat(
            where(), ": parents[", i, "] = ", p, " must be in [-1, ", i, ")"));
        }
        depth_[i] = p < 0 ? 0 : depth_[p] + 1;
        max_depth = std::max(max_depth, depth_[i]);
      }
    }
    if (int64_t(in.start_position) + max_depth >= config_.max_position_embeddings) {
      return absl::InvalidArgumentError(absl::StrCat(
            where(), ": position ", int64_t(in.start_position) + max_depth,
          " is past max_position_embeddings ", config_.max_position_embeddings));
    }
    for (size_t j = 0; j < in.logit_indices.size(); ++j) {
      const int idx = in.logit_indices[j];
      if (idx < 0 || idx >= n || (j > 0 && idx <= in.logit_indices[j - 1])) {
        return absl::InvalidArgumentError(absl::StrCat(
            where(), ": logit_indices must be strictly ascending in [0, ", n, "), got ", idx,
            " at ", j));
      }
    }
    const int held = known ? cache_.BlocksFor(cached) : 0;
    net_blocks += cache_.BlocksFor(in.start_position + n) - held;
  }
  if (total_rows > options_.max_batch_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("Forward: batch has ", total_rows,
                                                   " tokens, more than max_batch_tokens ",
                                                   options_.max_batch_tokens));
  }
  if (net_blocks > cache_.free_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV cache full: the batch needs ", net_blocks, " more blocks of ",
        cache_.block_size(), " tokens but only ", cache_.free_blocks(), " of ",
        cache_.total_blocks(), " are free; release or shorten sequences"));
  }
  return absl::OkStatus();
}

void LlamaModel::BuildPlan(const std::vector<SequenceInput>& batch) {
  StepPlan& plan = plan_;
  plan.block_size = cache_.block_size();
  plan.tokens.clear();
  plan.positions.clear();
  plan.kv_slots.clear();
  plan.logit_rows.clear();
  plan.sequences.resize(batch.size());
  int row = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& in = batch[s];
    const int n = static_cast<int>(in.tokens.size());
    StepPlan::Sequence& seq = plan.sequences[s];
    seq.row_begin = row;
    seq.row_count = n;
    seq.context_length = in.start_position;
    seq.block_table = **cache_.BlockTable(in.seq_id);
    seq.parents = in.parents;
    const int64_t bs = plan.block_size;
    for (int i = 0; i < n; ++i) {
      plan.tokens.push_back(in.tokens[i]);
      const int logical = in.start_position + i;
      plan.kv_slots.push_back(int64_t(seq.block_table[logical / bs]) * bs + logical % bs);
      int depth = i;
      if (!in.parents.empty()) {
        if (i == 0) depth_.resize(n);
        depth = depth_[i] = in.parents[i] < 0 ? 0 : depth_[in.parents[i]] + 1;
      }
      plan.positions.push_back(in.start_position + depth);
    }
    for (int idx : in.logit_indices) plan.logit_rows.push_back(row + idx);
    row += n;
  }
}

absl::Status LlamaModel::AllReduce(float* data, size_t count) {
  if (comm_ == nullptr) return absl::OkStatus();
  absl::Status status = backend_->Synchronize();
  if (!status.ok()) return status;
  return comm_->AllReduceSum(data, count, options_.collective_timeout);
}

absl::Status LlamaModel::Compute(std::vector<float>* logits) {
  const int rows = plan_.num_rows();
  const int num_logits = static_cast<int>(plan_.logit_rows.size());
  absl::Status status = EnsureScratch(rows, num_logits);
  if (!status.ok()) return status;
  auto prepared_or = backend_->Prepare(plan_);
  if (!prepared_or.ok()) return prepared_or.status();
  const PreparedStep& step = **prepared_or;

  const LlamaConfig& c = config_;
  const int hidden = c.hidden_size;
  const float eps = c.rms_norm_eps;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  float* x = x_.f32();
  backend_->Embedding(step, embed_tokens_, x);
  for (int i = 0; i < c.num_layers; ++i) {
    const Layer& l = layers_[i];
    // Attention block.
    backend_->RmsNorm(x, l.input_norm, rows, hidden, eps, normed_.f32());
    backend_->MatMul(normed_.f32(), rows, l.q_proj, q_.f32());
    backend_->MatMul(normed_.f32(), rows, l.k_proj, k_.f32());
    backend_->MatMul(normed_.f32(), rows, l.v_proj, v_.f32());
    backend_->Rope(step, q_.f32(), heads_local_, c.head_dim, inv_freq_.data());
    backend_->Rope(step, k_.f32(), kv_heads_local_, c.head_dim, inv_freq_.data());
    backend_->WriteKv(step, k_.f32(), v_.f32(), kv_layout_, k_cache_[i].f32(),
                      v_cache_[i].f32());
    backend_->Attention(step, q_.f32(), kv_layout_, k_cache_[i].f32(), v_cache_[i].f32(),
                        heads_local_, scale, attn_.f32());
    backend_->MatMul(attn_.f32(), rows, l.o_proj, proj_.f32());
    status = AllReduce(proj_.f32(), size_t(rows) * hidden);
    if (!status.ok()) return status;
    backend_->Add(x, proj_.f32(), size_t(rows) * hidden);
    // MLP block.
    backend_->RmsNorm(x, l.post_attn_norm, rows, hidden, eps, normed_.f32());
    backend_->MatMul(normed_.f32(), rows, l.gate_proj, gate_.f32());
    backend_->MatMul(normed_.f32(), rows, l.up_proj, up_.f32());
    backend_->SiluMul(gate_.f32(), up_.f32(), size_t(rows) * intermediate_local_, act_.f32());
    backend_->MatMul(act_.f32(), rows, l.down_proj, proj_.f32());
    status = AllReduce(proj_.f32(), size_t(rows) * hidden);
    if (!status.ok()) return status;
    backend_->Add(x, proj_.f32(), size_t(rows) * hidden);
  }

  const size_t vocab = c.vocab_size;
  logits->resize(size_t(num_logits) * vocab);
  if (num_logits == 0) return backend_->Synchronize();
  // Only the requested rows go through the final norm and the LM head.
  backend_->GatherRows(x, hidden, plan_.logit_rows, logit_in_.f32());
  backend_->RmsNorm(logit_in_.f32(), final_norm_, num_logits, hidden, eps,
                    logit_normed_.f32());
  backend_->MatMul(logit_normed_.f32(), num_logits, lm_head_, logits_local_.f32());
  const size_t local_bytes = size_t(num_logits) * vocab_local_ * sizeof(float);
  if (comm_ == nullptr) {
    return backend_->CopyToHost(logits_local_.f32(), logits->data(), local_bytes);
  }
  status = backend_->Synchronize();
  if (!status.ok()) return status;
  status = comm_->AllGather(logits_local_.f32(), logits_gathered_.f32(), local_bytes,
                            options_.collective_timeout);
  if (!status.ok()) return status;
  status = backend_->CopyToHost(logits_gathered_.f32(), host_gathered_.data(),
                                local_bytes * tp_size_);
  if (!status.ok()) return status;
  // host_gathered_ is [rank, row, vocab_local]; logits are [row, rank * vocab_local].
  for (int r = 0; r < tp_size_; ++r) {
    const float* src = host_gathered_.data() + size_t(r) * num_logits * vocab_local_;
    for (int row = 0; row < num_logits; ++row) {
      std::copy_n(src + size_t(row) * vocab_local_, vocab_local_,
                  logits->data() + size_t(row) * vocab + size_t(r) * vocab_local_);
    }
  }
  return absl::OkStatus();
}

void LlamaModel::RollBack(const std::vector<SequenceInput>& batch,
                          const std::vector<bool>& created) {
  for (size_t s = 0; s < batch.size(); ++s) {
    last_forward_.erase(batch[s].seq_id);
    if (created[s]) {
      (void)cache_.Release(batch[s].seq_id);
    } else {
      (void)cache_.Truncate(batch[s].seq_id, batch[s].start_position);
    }
  }
}

absl::Status LlamaModel::Forward(const std::vector<SequenceInput>& batch,
                                 std::vector<float>* logits) {
  if (logits == nullptr) return absl::InvalidArgumentError("Forward: logits is null");
  absl::Status status = Validate(batch);
  if (!status.ok()) return status;

  // Roll back first (frees blocks), then grow; Validate checked the net block count.
  std::vector<bool>& created = created_;
  created.assign(batch.size(), false);
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& in = batch[s];
    created[s] = !cache_.Contains(in.seq_id);
    if (!created[s] && *cache_.Length(in.seq_id) > in.start_position) {
      (void)cache_.Truncate(in.seq_id, in.start_position);
    }
  }
  for (const SequenceInput& in : batch) {
    status = cache_.Reserve(in.seq_id, in.start_position + int(in.tokens.size()));
    if (!status.ok()) {  // Not expected after Validate; keep the state consistent.
      RollBack(batch, created);
      return status;
    }
  }
  BuildPlan(batch);
  status = Compute(logits);
  if (!status.ok()) {
    RollBack(batch, created);
    return status;
  }
  for (const SequenceInput& in : batch) {
    LastForward& last = last_forward_[in.seq_id];
    last.start_position = in.start_position;
    last.rows = static_cast<int>(in.tokens.size());
    last.parents = in.parents;
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::Truncate(uint64_t seq_id, int length) {
  return cache_.Truncate(seq_id, length);
}

absl::Status LlamaModel::Release(uint64_t seq_id) {
  last_forward_.erase(seq_id);
  return cache_.Release(seq_id);
}

absl::StatusOr<int> LlamaModel::CachedLength(uint64_t seq_id) const {
  return cache_.Length(seq_id);
}

absl::Status LlamaModel::KeepPath(uint64_t seq_id, int start_position,
                                  const std::vector<int32_t>& accepted_rows) {
  auto length = cache_.Length(seq_id);
  if (!length.ok()) return length.status();
  auto it = last_forward_.find(seq_id);
  if (it == last_forward_.end() || it->second.start_position != start_position ||
      *length != start_position + it->second.rows) {
    return absl::FailedPreconditionError(absl::StrCat(
        "KeepPath: sequence ", seq_id, " was not last fed at start_position ",
        start_position, " with its cache unchanged since (cached length ", *length, ")"));
  }
  const LastForward& last = it->second;
  for (size_t j = 0; j < accepted_rows.size(); ++j) {
    const int row = accepted_rows[j];
    if (row < 0 || row >= last.rows) {
      return absl::InvalidArgumentError(absl::StrCat("KeepPath: row ", row,
                                                     " is outside [0, ", last.rows, ")"));
    }
    const int parent = last.parents.empty() ? row - 1 : last.parents[row];
    const int expected = j == 0 ? -1 : accepted_rows[j - 1];
    if (parent != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KeepPath: accepted rows are not a root-to-node path: row ", row,
          " has parent ", parent, ", expected ", expected));
    }
  }
  // Sources are strictly ascending and each is >= its destination, so copying in
  // order never overwrites a source that is still to be read.
  const size_t slot_floats = size_t(kv_heads_local_) * config_.head_dim;
  for (size_t j = 0; j < accepted_rows.size(); ++j) {
    const int src_logical = start_position + accepted_rows[j];
    const int dst_logical = start_position + static_cast<int>(j);
    if (src_logical == dst_logical) continue;
    const int64_t src = *cache_.SlotOf(seq_id, src_logical);
    const int64_t dst = *cache_.SlotOf(seq_id, dst_logical);
    for (int l = 0; l < config_.num_layers; ++l) {
      for (const Buffer* buffer : {&k_cache_[l], &v_cache_[l]}) {
        absl::Status status = backend_->CopyOnDevice(buffer->f32() + src * slot_floats,
                                                     buffer->f32() + dst * slot_floats,
                                                     slot_floats * sizeof(float));
        if (!status.ok()) return status;
      }
    }
  }
  last_forward_.erase(it);
  return cache_.Truncate(seq_id, start_position + static_cast<int>(accepted_rows.size()));
}

KvCacheStats LlamaModel::kv_stats() const {
  KvCacheStats stats;
  stats.block_size = cache_.block_size();
  stats.total_blocks = cache_.total_blocks();
  stats.used_blocks = cache_.used_blocks();
  stats.free_blocks = cache_.free_blocks();
  stats.num_sequences = cache_.num_sequences();
  stats.bytes_per_block =
      KvBytesPerBlock(config_.num_layers, cache_.block_size(), kv_heads_local_, config_.head_dim);
  stats.total_bytes = stats.bytes_per_block * stats.total_blocks;
  return stats;
}

}  // namespace tandem
