// LlamaModel's KV cache calls: truncate, release, keep-path compaction and stats.
#include "absl/strings/str_cat.h"
#include "model/llama.h"

namespace tandem {

absl::Status LlamaModel::Truncate(uint64_t seq_id, int length) {
  return cache_.Truncate(seq_id, length);
}

absl::Status LlamaModel::Fork(uint64_t parent, uint64_t child, int length) {
  // A forked parent's blocks are shared: KeepPath may no longer compact them in place.
  last_forward_.erase(parent);
  last_forward_.erase(child);
  return cache_.Fork(parent, child, length);
}

absl::Status LlamaModel::CopyBlocks(const std::vector<KvCache::BlockCopy>& copies) {
  const size_t block_bytes = size_t(cache_.block_size()) * kv_heads_local_ * config_.head_dim *
                             DTypeSize(kv_layout_.dtype);
  for (const KvCache::BlockCopy& c : copies) {
    for (int l = 0; l < config_.num_layers; ++l) {
      for (const Buffer* buffer : {&k_cache_[l], &v_cache_[l]}) {
        auto* base = static_cast<uint8_t*>(buffer->data());
        absl::Status status = backend_->CopyOnDevice(base + c.src * block_bytes,
                                                     base + c.dst * block_bytes, block_bytes);
        if (!status.ok()) return status;
      }
    }
  }
  return absl::OkStatus();
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
  const size_t slot_bytes =
      size_t(kv_heads_local_) * config_.head_dim * DTypeSize(kv_layout_.dtype);
  for (size_t j = 0; j < accepted_rows.size(); ++j) {
    const int src_logical = start_position + accepted_rows[j];
    const int dst_logical = start_position + static_cast<int>(j);
    if (src_logical == dst_logical) continue;
    const int64_t src = *cache_.SlotOf(seq_id, src_logical);
    const int64_t dst = *cache_.SlotOf(seq_id, dst_logical);
    for (int l = 0; l < config_.num_layers; ++l) {
      for (const Buffer* buffer : {&k_cache_[l], &v_cache_[l]}) {
        auto* base = static_cast<uint8_t*>(buffer->data());
        absl::Status status =
            backend_->CopyOnDevice(base + src * slot_bytes, base + dst * slot_bytes, slot_bytes);
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
  stats.bytes_per_block = KvBytesPerBlock(config_.num_layers, cache_.block_size(), kv_heads_local_,
                                          config_.head_dim, DTypeSize(kv_layout_.dtype));
  stats.total_bytes = stats.bytes_per_block * stats.total_blocks;
  return stats;
}

}  // namespace tandem
