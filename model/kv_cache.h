// Paged KV cache bookkeeping: which physical blocks each sequence owns.
//
// The cache storage itself (one K and one V array per layer, laid out as
// kernels/backend.h KvLayout) lives in backend memory owned by the model; this class
// only hands out block ids. A sequence of length n owns ceil(n / block_size) blocks,
// listed in its block table; logical key index L lives in physical slot
// table[L / block_size] * block_size + L % block_size.
//
// Branches: Fork makes a sequence that shares another's blocks for a prefix (block
// reference counts); a block is freed when its last holder releases or truncates it.
// Writes go to logical indices >= a sequence's length (after Truncate), so the only
// shared block a write can touch is the one holding index `length` when that is
// partial: Reserve then gives the writer a private copy of it (copy-on-write), and the
// owner of the storage must copy the block's contents before writing (TakeBlockCopies).
//
// Every operation costs O(1) or O(blocks touched). Failed operations leave the state
// unchanged. Not thread-safe: the owner serializes calls.
#ifndef TANDEM_MODEL_KV_CACHE_H_
#define TANDEM_MODEL_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem {

// Bytes one block costs on one rank: K and V for every layer,
// num_layers * 2 * block_size * kv_heads_local * head_dim * value_bytes (4 for float32
// caches, 2 for f16/bf16).
size_t KvBytesPerBlock(int num_layers, int block_size, int kv_heads_local, int head_dim,
                       size_t value_bytes = sizeof(float));

class KvCache {
 public:
  // A cache of `num_blocks` blocks of `block_size` tokens. INVALID_ARGUMENT when
  // num_blocks < 0 or block_size < 1.
  static absl::StatusOr<KvCache> Create(int num_blocks, int block_size);

  // A cache holding as many whole blocks as `budget_bytes` allows at
  // `bytes_per_block` (see KvBytesPerBlock). INVALID_ARGUMENT when not even one
  // block fits or the count overflows an int.
  static absl::StatusOr<KvCache> ForBudget(size_t budget_bytes, size_t bytes_per_block,
                                           int block_size);

  // Grows `seq_id` to `new_length` tokens, allocating blocks so that logical indices
  // [0, new_length) have slots. An unknown id is created (at length 0) first. When
  // growing into a partial last block that another sequence shares, that block is
  // replaced by a private copy (queued for TakeBlockCopies).
  // INVALID_ARGUMENT when new_length < 0 or < the current length (use Truncate);
  // RESOURCE_EXHAUSTED when the free blocks do not suffice, in which case nothing
  // changes (an unknown id stays unknown).
  absl::Status Reserve(uint64_t seq_id, int new_length);

  // Makes `child` a branch of `parent` holding its first `length` tokens: it shares the
  // parent's first BlocksFor(length) blocks (no free block is taken). A `child` that
  // exists is released first (so forking a sequence back from its branch adopts the
  // branch's cache). NOT_FOUND for an unknown parent; INVALID_ARGUMENT when child ==
  // parent or length is outside [0, Length(parent)].
  absl::Status Fork(uint64_t parent, uint64_t child, int length);

  // A block whose contents must be copied from `src` to `dst` (physical ids) before
  // the sequence that now holds `dst` is written.
  struct BlockCopy {
    int32_t src = 0;
    int32_t dst = 0;
  };
  // The copies queued by Reserve since the last call, in order; clears the queue.
  std::vector<BlockCopy> TakeBlockCopies();

  // Shrinks `seq_id` to `length` tokens and drops the blocks wholly past the end (freed
  // unless another sequence holds them).
  // NOT_FOUND for an unknown id; INVALID_ARGUMENT when length < 0 or > Length.
  absl::Status Truncate(uint64_t seq_id, int length);

  // Forgets `seq_id` and frees all its blocks no other sequence holds. NOT_FOUND for
  // an unknown id.
  absl::Status Release(uint64_t seq_id);

  bool Contains(uint64_t seq_id) const;
  // Tokens held for `seq_id`. NOT_FOUND for an unknown id.
  absl::StatusOr<int> Length(uint64_t seq_id) const;
  // Physical block ids of `seq_id`, ceil(Length / block_size) of them. The pointer
  // is valid until the next mutating call. NOT_FOUND for an unknown id.
  absl::StatusOr<const std::vector<int32_t>*> BlockTable(uint64_t seq_id) const;
  // Physical slot (block * block_size + offset) of logical index `logical_index`,
  // which must be < the number of slots the sequence's blocks cover.
  // NOT_FOUND for an unknown id; OUT_OF_RANGE for an index without a block.
  absl::StatusOr<int64_t> SlotOf(uint64_t seq_id, int logical_index) const;

  // Blocks that growing `seq_id` (unknown = length 0) to `new_length` would take
  // from the free list (a copy-on-write of a shared partial block included); 0 when it
  // already has them.
  int BlocksNeeded(uint64_t seq_id, int new_length) const;
  // Net change in free blocks' use of truncating the known `seq_id` to `from` (<= its
  // length) and growing it to `new_length` (>= from): blocks taken (a copy-on-write
  // included) minus blocks the truncation frees (only those no other sequence holds).
  // Negative when the truncation frees more than the growth takes.
  int NetBlocksToRewrite(uint64_t seq_id, int from, int new_length) const;
  // Blocks needed to hold `length` tokens.
  int BlocksFor(int length) const { return (length + block_size_ - 1) / block_size_; }

  int block_size() const { return block_size_; }
  int total_blocks() const { return total_blocks_; }
  int free_blocks() const { return static_cast<int>(free_list_.size()); }
  int used_blocks() const { return total_blocks_ - free_blocks(); }
  // Holders of physical block `block` (0 = free), for tests and stats.
  int RefCount(int32_t block) const { return refs_[block]; }
  int num_sequences() const { return static_cast<int>(sequences_.size()); }

 private:
  struct Sequence {
    int length = 0;
    std::vector<int32_t> blocks;
  };
  KvCache(int num_blocks, int block_size);
  // Whether growing `seq` past its length writes into a block another sequence holds.
  bool NeedsCopyOnWrite(const Sequence& seq) const;
  int32_t TakeBlock();
  void DropBlock(int32_t block);  // One holder fewer; frees it at 0.

  int block_size_ = 16;
  int total_blocks_ = 0;
  std::vector<int32_t> free_list_;  // Stack of free block ids.
  std::vector<int> refs_;           // Holders per block.
  std::vector<BlockCopy> copies_;   // Queued by Reserve.
  std::unordered_map<uint64_t, Sequence> sequences_;
};

}  // namespace tandem

#endif  // TANDEM_MODEL_KV_CACHE_H_
