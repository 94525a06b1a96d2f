#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tandem {
namespace {

absl::StatusOr<Buffer> AllocateFloats(Backend* backend, size_t count) {
  return backend->Allocate(std::max<size_t>(count, 1) * sizeof(float));
}

}  // namespace

int CountLogitRows(const std::vector<SequenceInput>& batch) {
  size_t rows = 0;
  for (const SequenceInput& in : batch) rows += in.logit_indices.size();
  return static_cast<int>(rows);
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
        {&x_, hidden},
        {&normed_, hidden},
        {&q_, heads_local_ * hd},
        {&k_, kv_heads_local_ * hd},
        {&v_, kv_heads_local_ * hd},
        {&attn_, heads_local_ * hd},
        {&proj_, hidden},
        {&gate_, size_t(intermediate_local_)},
        {&up_, size_t(intermediate_local_)},
        {&act_, size_t(intermediate_local_)},
    };
    for (const Item& item : items) {
      auto buffer = AllocateFloats(backend_, n * item.width);
      if (!buffer.ok()) return buffer.status();
      *item.buffer = *std::move(buffer);
    }
    scratch_rows_ = static_cast<int>(n);
  }
  if (logit_rows > scratch_logit_rows_) {
    const size_t n =
        std::max(logit_rows, std::min(options_.max_batch_tokens, 2 * scratch_logit_rows_));
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
    }
    scratch_logit_rows_ = static_cast<int>(n);
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::ValidateSequence(const SequenceInput& in, size_t s, int64_t* total_rows,
                                          int64_t* net_blocks) {
  // Built only on error paths.
  const auto where = [&]() {
    return absl::StrCat("Forward: sequence ", in.seq_id, " (batch entry ", s, ")");
  };
  if (!seen_ids_.insert(in.seq_id).second) {
    return absl::InvalidArgumentError(absl::StrCat(where(), " appears twice in the batch"));
  }
  const int n = static_cast<int>(in.tokens.size());
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(where(), ": no tokens"));
  *total_rows += n;
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
    return absl::InvalidArgumentError(absl::StrCat(where(), ": start_position ", in.start_position,
                                                   " but ", cached, " tokens are cached"));
  }
  int max_depth = n - 1;
  if (!in.parents.empty()) {
    if (static_cast<int>(in.parents.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": ", in.parents.size(), " parents for ", n, " tokens"));
    }
    depth_.resize(n);
    max_depth = 0;
    for (int i = 0; i < n; ++i) {
      const int p = in.parents[i];
      if (p < -1 || p >= i) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(), ": parents[", i, "] = ", p, " must be in [-1, ", i, ")"));
      }
      depth_[i] = p < 0 ? 0 : depth_[p] + 1;
      max_depth = std::max(max_depth, depth_[i]);
    }
  }
  if (!in.positions.empty()) {
    if (static_cast<int>(in.positions.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": ", in.positions.size(), " positions for ", n, " tokens"));
    }
    for (int i = 0; i < n; ++i) {
      if (in.positions[i] < 0 || in.positions[i] >= config_.max_position_embeddings) {
        return absl::InvalidArgumentError(absl::StrCat(
            where(), ": positions[", i, "] = ", in.positions[i],
            " is outside [0, max_position_embeddings ", config_.max_position_embeddings, ")"));
      }
    }
  } else if (int64_t(in.start_position) + max_depth >= config_.max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": position ", int64_t(in.start_position) + max_depth,
                     " is past max_position_embeddings ", config_.max_position_embeddings));
  }
  for (size_t j = 0; j < in.logit_indices.size(); ++j) {
    const int idx = in.logit_indices[j];
    if (idx < 0 || idx >= n || (j > 0 && idx <= in.logit_indices[j - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": logit_indices must be strictly ascending in [0, ", n, "), got ",
                       idx, " at ", j));
    }
  }
  *net_blocks += cache_.NetBlocksToRewrite(in.seq_id, in.start_position, in.start_position + n);
  return absl::OkStatus();
}

absl::Status LlamaModel::Validate(const std::vector<SequenceInput>& batch) {
  if (batch.empty()) return absl::InvalidArgumentError("Forward: empty batch");
  seen_ids_.clear();
  int64_t total_rows = 0;
  int64_t net_blocks = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    absl::Status status = ValidateSequence(batch[s], s, &total_rows, &net_blocks);
    if (!status.ok()) return status;
  }
  if (total_rows > options_.max_batch_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("Forward: batch has ", total_rows,
                                                   " tokens, more than max_batch_tokens ",
                                                   options_.max_batch_tokens));
  }
  if (net_blocks > cache_.free_blocks()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV cache full: the batch needs ", net_blocks, " more blocks of ",
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
      plan.positions.push_back(in.positions.empty() ? in.start_position + depth : in.positions[i]);
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

absl::Status LlamaModel::RunLayers(const PreparedStep& step) {
  const LlamaConfig& c = config_;
  const int rows = plan_.num_rows();
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
    backend_->WriteKv(step, k_.f32(), v_.f32(), kv_layout_, k_cache_[i].data(), v_cache_[i].data());
    backend_->Attention(step, q_.f32(), kv_layout_, k_cache_[i].data(), v_cache_[i].data(),
                        heads_local_, scale, attn_.f32());
    backend_->MatMul(attn_.f32(), rows, l.o_proj, proj_.f32());
    TANDEM_RETURN_IF_ERROR(AllReduce(proj_.f32(), size_t(rows) * hidden));
    backend_->Add(x, proj_.f32(), size_t(rows) * hidden);
    // MLP block.
    backend_->RmsNorm(x, l.post_attn_norm, rows, hidden, eps, normed_.f32());
    backend_->MatMul(normed_.f32(), rows, l.gate_proj, gate_.f32());
    backend_->MatMul(normed_.f32(), rows, l.up_proj, up_.f32());
    backend_->SiluMul(gate_.f32(), up_.f32(), size_t(rows) * intermediate_local_, act_.f32());
    backend_->MatMul(act_.f32(), rows, l.down_proj, proj_.f32());
    TANDEM_RETURN_IF_ERROR(AllReduce(proj_.f32(), size_t(rows) * hidden));
    backend_->Add(x, proj_.f32(), size_t(rows) * hidden);
  }
  return absl::OkStatus();
}

absl::StatusOr<ForwardOutputs> LlamaModel::ComputeOutputs() {
  const LlamaConfig& c = config_;
  const int num_logits = static_cast<int>(plan_.logit_rows.size());
  TANDEM_RETURN_IF_ERROR(EnsureScratch(plan_.num_rows(), num_logits));
  auto prepared_or = backend_->Prepare(plan_);
  if (!prepared_or.ok()) return prepared_or.status();
  TANDEM_RETURN_IF_ERROR(RunLayers(**prepared_or));

  ForwardOutputs out;
  out.hidden_size = c.hidden_size;
  if (num_logits == 0) {
    TANDEM_RETURN_IF_ERROR(backend_->Synchronize());
    out.logits = LogitsView{nullptr, 0, c.vocab_size, 1};
    return out;
  }
  // Only the requested rows go through the final norm and the LM head.
  backend_->GatherRows(x_.f32(), c.hidden_size, plan_.logit_rows, logit_in_.f32());
  backend_->RmsNorm(logit_in_.f32(), final_norm_, num_logits, c.hidden_size, c.rms_norm_eps,
                    logit_normed_.f32());
  backend_->MatMul(logit_normed_.f32(), num_logits, lm_head_, logits_local_.f32());
  out.hidden_rows = logit_normed_.f32();
  if (comm_ == nullptr) {
    out.logits = LogitsView{logits_local_.f32(), num_logits, c.vocab_size, 1};
    return out;
  }
  TANDEM_RETURN_IF_ERROR(backend_->Synchronize());
  TANDEM_RETURN_IF_ERROR(comm_->AllGather(logits_local_.f32(), logits_gathered_.f32(),
                                          size_t(num_logits) * vocab_local_ * sizeof(float),
                                          options_.collective_timeout));
  // Rank-major: [rank, row, vocab_local].
  out.logits = LogitsView{logits_gathered_.f32(), num_logits, c.vocab_size, tp_size_};
  return out;
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

absl::Status LlamaModel::Run(const std::vector<SequenceInput>& batch, ForwardConsumer& consumer) {
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
  absl::Status status;
  for (const SequenceInput& in : batch) {
    status = cache_.Reserve(in.seq_id, in.start_position + int(in.tokens.size()));
    if (!status.ok()) break;  // Not expected after Validate.
  }
  // Copy-on-write of shared partial blocks, before anything writes to them (also on
  // the roll-back path: the copies hold the prefixes the sequences keep).
  if (absl::Status copied = CopyBlocks(cache_.TakeBlockCopies()); status.ok()) status = copied;
  if (!status.ok()) {
    RollBack(batch, created);
    return status;
  }
  BuildPlan(batch);
  absl::StatusOr<ForwardOutputs> outputs = ComputeOutputs();
  if (outputs.ok() && !consumer.wants_hidden_rows()) outputs->hidden_rows = nullptr;
  status = outputs.ok() ? consumer.Consume(*backend_, *outputs) : outputs.status();
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

absl::Status LlamaModel::Forward(const std::vector<SequenceInput>& batch,
                                 ForwardConsumer& consumer) {
  TANDEM_RETURN_IF_ERROR(Validate(batch));
  TANDEM_RETURN_IF_ERROR(consumer.CheckRows(CountLogitRows(batch)));
  return Run(batch, consumer);
}

}  // namespace tandem
