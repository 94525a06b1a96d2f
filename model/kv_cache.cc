#include "model/kv_cache.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {

size_t KvBytesPerBlock(int num_layers, int block_size, int kv_heads_local, int head_dim) {
  return size_t(num_layers) * 2 * size_t(block_size) * size_t(kv_heads_local) * size_t(head_dim) *
         sizeof(float);
}

KvCache::KvCache(int num_blocks, int block_size)
    : block_size_(block_size), total_blocks_(num_blocks) {
  free_list_.reserve(num_blocks);
  // Pop from the back: low block ids are handed out first.
  for (int b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

absl::StatusOr<KvCache> KvCache::Create(int num_blocks, int block_size) {
  if (num_blocks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KvCache: num_blocks must be >= 0, got ", num_blocks));
  }
  if (block_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("KvCache: block_size must be >= 1, got ", block_size));
  }
  return KvCache(num_blocks, block_size);
}

absl::StatusOr<KvCache> KvCache::ForBudget(size_t budget_bytes, size_t bytes_per_block,
                                           int block_size) {
  if (bytes_per_block == 0) {
    return absl::InvalidArgumentError("KvCache: bytes_per_block must be > 0");
  }
  const size_t blocks = budget_bytes / bytes_per_block;
  if (blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("KvCache: a budget of ", budget_bytes,
                                                   " bytes holds no block of ", bytes_per_block,
                                                   " bytes; raise the KV cache budget"));
  }
  if (blocks > size_t(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("KvCache: budget of ", budget_bytes, " bytes gives ", blocks,
                     " blocks, more than an int32 block id can address"));
  }
  return Create(static_cast<int>(blocks), block_size);
}

int KvCache::BlocksNeeded(uint64_t seq_id, int new_length) const {
  auto it = sequences_.find(seq_id);
  const int held = it == sequences_.end() ? 0 : static_cast<int>(it->second.blocks.size());
  const int want = BlocksFor(new_length);
  return want > held ? want - held : 0;
}

absl::Status KvCache::Reserve(uint64_t seq_id, int new_length) {
  auto it = sequences_.find(seq_id);
  const int length = it == sequences_.end() ? 0 : it->second.length;
  if (new_length < 0 || new_length < length) {
    return absl::InvalidArgumentError(absl::StrCat("KvCache::Reserve: sequence ", seq_id,
                                                   " has length ", length, "; cannot reserve to ",
                                                   new_length, " (use Truncate to shrink)"));
  }
  const int needed = BlocksNeeded(seq_id, new_length);
  if (needed > free_blocks()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV cache full: sequence ", seq_id, " needs ", needed, " more blocks of ",
                     block_size_, " tokens to reach length ", new_length, " but only ",
                     free_blocks(), " of ", total_blocks_, " blocks are free"));
  }
  Sequence& seq = it == sequences_.end() ? sequences_[seq_id] : it->second;
  for (int i = 0; i < needed; ++i) {
    seq.blocks.push_back(free_list_.back());
    free_list_.pop_back();
  }
  seq.length = new_length;
  return absl::OkStatus();
}

absl::Status KvCache::Truncate(uint64_t seq_id, int length) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(absl::StrCat("KvCache::Truncate: unknown sequence ", seq_id));
  }
  Sequence& seq = it->second;
  if (length < 0 || length > seq.length) {
    return absl::InvalidArgumentError(absl::StrCat("KvCache::Truncate: sequence ", seq_id,
                                                   " has length ", seq.length,
                                                   "; cannot truncate to ", length));
  }
  const size_t keep = static_cast<size_t>(BlocksFor(length));
  while (seq.blocks.size() > keep) {
    free_list_.push_back(seq.blocks.back());
    seq.blocks.pop_back();
  }
  seq.length = length;
  return absl::OkStatus();
}

absl::Status KvCache::Release(uint64_t seq_id) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(absl::StrCat("KvCache::Release: unknown sequence ", seq_id));
  }
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) {
    free_list_.push_back(*b);
  }
  sequences_.erase(it);
  return absl::OkStatus();
}

bool KvCache::Contains(uint64_t seq_id) const { return sequences_.count(seq_id) > 0; }

absl::StatusOr<int> KvCache::Length(uint64_t seq_id) const {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(absl::StrCat("KvCache::Length: unknown sequence ", seq_id));
  }
  return it->second.length;
}

absl::StatusOr<const std::vector<int32_t>*> KvCache::BlockTable(uint64_t seq_id) const {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(absl::StrCat("KvCache::BlockTable: unknown sequence ", seq_id));
  }
  return &it->second.blocks;
}

absl::StatusOr<int64_t> KvCache::SlotOf(uint64_t seq_id, int logical_index) const {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(absl::StrCat("KvCache::SlotOf: unknown sequence ", seq_id));
  }
  const std::vector<int32_t>& blocks = it->second.blocks;
  if (logical_index < 0 || logical_index / block_size_ >= static_cast<int>(blocks.size())) {
    return absl::OutOfRangeError(absl::StrCat("KvCache::SlotOf: sequence ", seq_id, " has ",
                                              blocks.size(), " blocks; logical index ",
                                              logical_index, " has no slot"));
  }
  return int64_t(blocks[logical_index / block_size_]) * block_size_ + logical_index % block_size_;
}

}  // namespace tandem
