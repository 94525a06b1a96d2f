#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/accept/draft_sample.h"
#include "kernels/accept/verify_accept.h"

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
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": start_position ", in.start_position, " but ", cached, " tokens are cached"));
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
    if (int64_t(in.start_position) + max_depth >= config_.max_position_embeddings) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": position ", int64_t(in.start_position) + max_depth,
                       " is past max_position_embeddings ", config_.max_position_embeddings));
    }
    for (size_t j = 0; j < in.logit_indices.size(); ++j) {
      const int idx = in.logit_indices[j];
      if (idx < 0 || idx >= n || (j > 0 && idx <= in.logit_indices[j - 1])) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(), ": logit_indices must be strictly ascending in [0, ", n,
                         "), got ", idx, " at ", j));
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

absl::StatusOr<LogitsView> LlamaModel::ComputeLogits() {
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
    backend_->WriteKv(step, k_.f32(), v_.f32(), kv_layout_, k_cache_[i].f32(), v_cache_[i].f32());
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

  if (num_logits == 0) {
    status = backend_->Synchronize();
    if (!status.ok()) return status;
    return LogitsView{nullptr, 0, c.vocab_size, 1};
  }
  // Only the requested rows go through the final norm and the LM head.
  backend_->GatherRows(x, hidden, plan_.logit_rows, logit_in_.f32());
  backend_->RmsNorm(logit_in_.f32(), final_norm_, num_logits, hidden, eps, logit_normed_.f32());
  backend_->MatMul(logit_normed_.f32(), num_logits, lm_head_, logits_local_.f32());
  if (comm_ == nullptr) return LogitsView{logits_local_.f32(), num_logits, c.vocab_size, 1};
  status = backend_->Synchronize();
  if (!status.ok()) return status;
  status = comm_->AllGather(logits_local_.f32(), logits_gathered_.f32(),
                            size_t(num_logits) * vocab_local_ * sizeof(float),
                            options_.collective_timeout);
  if (!status.ok()) return status;
  // Rank-major: [rank, row, vocab_local].
  return LogitsView{logits_gathered_.f32(), num_logits, c.vocab_size, tp_size_};
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

absl::Status LlamaModel::Run(const std::vector<SequenceInput>& batch,
                             absl::FunctionRef<absl::Status(const LogitsView&)> consume) {
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
    if (!status.ok()) {  // Not expected after Validate; keep the state consistent.
      RollBack(batch, created);
      return status;
    }
  }
  BuildPlan(batch);
  absl::StatusOr<LogitsView> view = ComputeLogits();
  status = view.ok() ? consume(*view) : view.status();
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
                                 std::vector<float>* logits) {
  if (logits == nullptr) return absl::InvalidArgumentError("Forward: logits is null");
  absl::Status status = Validate(batch);
  if (!status.ok()) return status;
  return Run(batch, [&](const LogitsView& view) {
    return backend_->CopyLogitsToHost(view, logits, &host_gathered_);
  });
}

absl::Status LlamaModel::ForwardAccept(const std::vector<SequenceInput>& batch,
                                       absl::Span<const VerifyChain> chains,
                                       std::vector<VerifyOutcome>* outcomes) {
  if (outcomes == nullptr) return absl::InvalidArgumentError("ForwardAccept: outcomes is null");
  absl::Status status = Validate(batch);
  if (status.ok()) status = ValidateChainRows(chains, CountLogitRows(batch));
  if (!status.ok()) return status;
  return Run(batch, [&](const LogitsView& view) {
    return backend_->VerifyAccept(view, chains, outcomes);
  });
}

absl::Status LlamaModel::ForwardSampleDrafts(const std::vector<SequenceInput>& batch,
                                             absl::Span<const DraftRow> drafts,
                                             std::vector<DraftProposal>* proposals) {
  if (proposals == nullptr) {
    return absl::InvalidArgumentError("ForwardSampleDrafts: proposals is null");
  }
  absl::Status status = Validate(batch);
  if (status.ok()) status = ValidateDraftRows(drafts, CountLogitRows(batch));
  if (!status.ok()) return status;
  return Run(batch, [&](const LogitsView& view) {
    return backend_->SampleDrafts(view, drafts, proposals);
  });
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
        "KeepPath: sequence ", seq_id, " was not last fed at start_position ", start_position,
        " with its cache unchanged since (cached length ", *length, ")"));
  }
  const LastForward& last = it->second;
  for (size_t j = 0; j < accepted_rows.size(); ++j) {
    const int row = accepted_rows[j];
    if (row < 0 || row >= last.rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("KeepPath: row ", row, " is outside [0, ", last.rows, ")"));
    }
    const int parent = last.parents.empty() ? row - 1 : last.parents[row];
    const int expected = j == 0 ? -1 : accepted_rows[j - 1];
    if (parent != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("KeepPath: accepted rows are not a root-to-node path: row ", row,
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
        absl::Status status =
            backend_->CopyOnDevice(buffer->f32() + src * slot_floats,
                                   buffer->f32() + dst * slot_floats, slot_floats * sizeof(float));
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
