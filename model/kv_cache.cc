#include "model/kv_cache.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {

size_t KvBytesPerBlock(int num_layers, int block_size, int kv_heads_local, int head_dim,
                       size_t value_bytes) {
  return size_t(num_layers) * 2 * size_t(block_size) * size_t(kv_heads_local) * size_t(head_dim) *
         value_bytes;
}

KvCache::KvCache(int num_blocks, int block_size)
    : block_size_(block_size), total_blocks_(num_blocks), refs_(num_blocks, 0) {
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

bool KvCache::NeedsCopyOnWrite(const Sequence& seq) const {
  return seq.length % block_size_ != 0 && refs_[seq.blocks.back()] > 1;
}

int32_t KvCache::TakeBlock() {
  const int32_t block = free_list_.back();
  free_list_.pop_back();
  refs_[block] = 1;
  return block;
}

void KvCache::DropBlock(int32_t block) {
  if (--refs_[block] == 0) free_list_.push_back(block);
}

int KvCache::BlocksNeeded(uint64_t seq_id, int new_length) const {
  auto it = sequences_.find(seq_id);
  const int held = it == sequences_.end() ? 0 : static_cast<int>(it->second.blocks.size());
  const int want = BlocksFor(new_length);
  const bool copy =
      it != sequences_.end() && new_length > it->second.length && NeedsCopyOnWrite(it->second);
  return (want > held ? want - held : 0) + (copy ? 1 : 0);
}

int KvCache::NetBlocksToRewrite(uint64_t seq_id, int from, int new_length) const {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return BlocksFor(new_length);
  const std::vector<int32_t>& blocks = it->second.blocks;
  const int keep = std::min<int>(BlocksFor(from), blocks.size());
  int freed = 0;
  for (size_t b = keep; b < blocks.size(); ++b) freed += refs_[blocks[b]] == 1 ? 1 : 0;
  const bool copy = new_length > from && from % block_size_ != 0 && refs_[blocks[keep - 1]] > 1;
  return BlocksFor(new_length) - keep + (copy ? 1 : 0) - freed;
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
  if (new_length > seq.length && NeedsCopyOnWrite(seq)) {
    const int32_t shared = seq.blocks.back();
    seq.blocks.back() = TakeBlock();
    copies_.push_back({shared, seq.blocks.back()});
    DropBlock(shared);
  }
  while (static_cast<int>(seq.blocks.size()) < BlocksFor(new_length)) {
    seq.blocks.push_back(TakeBlock());
  }
  seq.length = new_length;
  return absl::OkStatus();
}

absl::Status KvCache::Fork(uint64_t parent, uint64_t child, int length) {
  auto it = sequences_.find(parent);
  if (it == sequences_.end()) {
    return absl::NotFoundError(absl::StrCat("KvCache::Fork: unknown parent ", parent));
  }
  if (child == parent || length < 0 || length > it->second.length) {
    return absl::InvalidArgumentError(absl::StrCat("KvCache::Fork: cannot fork sequence ", child,
                                                   " from ", parent, " (length ", it->second.length,
                                                   ") at length ", length));
  }
  Sequence branch;
  branch.length = length;
  branch.blocks.assign(it->second.blocks.begin(), it->second.blocks.begin() + BlocksFor(length));
  for (int32_t b : branch.blocks) ++refs_[b];
  if (Contains(child)) (void)Release(child);  // After the parent's blocks are held.
  sequences_[child] = std::move(branch);
  return absl::OkStatus();
}

std::vector<KvCache::BlockCopy> KvCache::TakeBlockCopies() {
  std::vector<BlockCopy> copies;
  copies.swap(copies_);
  return copies;
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
    DropBlock(seq.blocks.back());
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
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) DropBlock(*b);
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
