// Paged KV cache bookkeeping: which physical blocks each sequence owns.
//
// The cache storage itself (one K and one V array per layer, laid out as
// kernels/backend.h KvLayout) lives in backend memory owned by the model; this class
// only hands out block ids. A sequence of length n owns ceil(n / block_size) blocks,
// listed in its block table; logical key index L lives in physical slot
// table[L / block_size] * block_size + L % block_size.
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
// num_layers * 2 * block_size * kv_heads_local * head_dim * sizeof(float).
size_t KvBytesPerBlock(int num_layers, int block_size, int kv_heads_local, int head_dim);

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
  // [0, new_length) have slots. An unknown id is created (at length 0) first.
  // INVALID_ARGUMENT when new_length < 0 or < the current length (use Truncate);
  // RESOURCE_EXHAUSTED when the free blocks do not suffice, in which case nothing
  // changes (an unknown id stays unknown).
  absl::Status Reserve(uint64_t seq_id, int new_length);

  // Shrinks `seq_id` to `length` tokens and frees the blocks wholly past the end.
  // NOT_FOUND for an unknown id; INVALID_ARGUMENT when length < 0 or > Length.
  absl::Status Truncate(uint64_t seq_id, int length);

  // Forgets `seq_id` and frees all its blocks. NOT_FOUND for an unknown id.
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
  // from the free list; 0 when it already has them.
  int BlocksNeeded(uint64_t seq_id, int new_length) const;
  // Blocks needed to hold `length` tokens.
  int BlocksFor(int length) const { return (length + block_size_ - 1) / block_size_; }

  int block_size() const { return block_size_; }
  int total_blocks() const { return total_blocks_; }
  int free_blocks() const { return static_cast<int>(free_list_.size()); }
  int used_blocks() const { return total_blocks_ - free_blocks(); }
  int num_sequences() const { return static_cast<int>(sequences_.size()); }

 private:
  struct Sequence {
    int length = 0;
    std::vector<int32_t> blocks;
  };
  KvCache(int num_blocks, int block_size);

  int block_size_ = 16;
  int total_blocks_ = 0;
  std::vector<int32_t> free_list_;  // Stack of free block ids.
  std::unordered_map<uint64_t, Sequence> sequences_;
};

}  // namespace tandem

#endif  // TANDEM_MODEL_KV_CACHE_H_
