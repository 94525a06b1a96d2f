#include "model/kv_cache.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "gtest/gtest.h"

namespace tandem {
namespace {

KvCache MakeCache(int blocks, int block_size) {
  auto cache = KvCache::Create(blocks, block_size);
  EXPECT_TRUE(cache.ok()) << cache.status();
  return *std::move(cache);
}

std::vector<int32_t> Table(const KvCache& cache, uint64_t seq) {
  auto table = cache.BlockTable(seq);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? **table : std::vector<int32_t>{};
}

TEST(KvCacheTest, BudgetMath) {
  // 4 layers * 2 (K, V) * 16 tokens * 2 heads * 32 dims * 4 bytes.
  EXPECT_EQ(KvBytesPerBlock(4, 16, 2, 32), size_t(4 * 2 * 16 * 2 * 32 * 4));
  const size_t per_block = KvBytesPerBlock(4, 16, 2, 32);
  auto cache = KvCache::ForBudget(10 * per_block + per_block - 1, per_block, 16);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ(cache->total_blocks(), 10);
  EXPECT_EQ(cache->free_blocks(), 10);
  EXPECT_EQ(cache->used_blocks(), 0);
  EXPECT_EQ(cache->block_size(), 16);

  auto too_small = KvCache::ForBudget(per_block - 1, per_block, 16);
  EXPECT_EQ(too_small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvCache::Create(4, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvCache::Create(-1, 16).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvCacheTest, ReserveAllocatesWholeBlocksAndMapsSlots) {
  KvCache cache = MakeCache(8, 4);
  ASSERT_TRUE(cache.Reserve(7, 5).ok());
  EXPECT_TRUE(cache.Contains(7));
  EXPECT_EQ(*cache.Length(7), 5);
  EXPECT_EQ(cache.used_blocks(), 2);
  EXPECT_EQ(cache.num_sequences(), 1);
  ASSERT_TRUE(cache.Reserve(9, 4).ok());
  ASSERT_TRUE(cache.Reserve(7, 8).ok());  // Still 2 blocks.
  EXPECT_EQ(cache.used_blocks(), 3);
  ASSERT_TRUE(cache.Reserve(7, 9).ok());  // Third block.
  EXPECT_EQ(cache.used_blocks(), 4);

  const std::vector<int32_t> table = Table(cache, 7);
  ASSERT_EQ(table.size(), 3u);
  for (int i = 0; i < 12; ++i) {
    auto slot = cache.SlotOf(7, i);
    ASSERT_TRUE(slot.ok()) << slot.status();
    EXPECT_EQ(*slot, int64_t(table[i / 4]) * 4 + i % 4) << i;
  }
  EXPECT_EQ(cache.SlotOf(7, 12).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(cache.SlotOf(7, -1).status().code(), absl::StatusCode::kOutOfRange);
  // Blocks of different sequences are disjoint.
  for (int32_t b : Table(cache, 9)) {
    EXPECT_EQ(std::count(table.begin(), table.end(), b), 0);
  }
}

TEST(KvCacheTest, ExhaustionLeavesStateUnchanged) {
  KvCache cache = MakeCache(3, 4);
  ASSERT_TRUE(cache.Reserve(1, 6).ok());  // 2 blocks.
  const std::vector<int32_t> before = Table(cache, 1);

  absl::Status status = cache.Reserve(1, 13);  // Needs 2 more, 1 free.
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("KV cache full"), std::string::npos) << status;
  EXPECT_EQ(*cache.Length(1), 6);
  EXPECT_EQ(Table(cache, 1), before);
  EXPECT_EQ(cache.free_blocks(), 1);

  // A new sequence that does not fit is not created.
  EXPECT_EQ(cache.Reserve(2, 5).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(cache.Contains(2));
  EXPECT_EQ(cache.num_sequences(), 1);

  // Exactly filling the cache works.
  ASSERT_TRUE(cache.Reserve(2, 4).ok());
  EXPECT_EQ(cache.free_blocks(), 0);
  EXPECT_EQ(cache.Reserve(2, 5).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*cache.Length(2), 4);
}

TEST(KvCacheTest, TruncateFreesWholeBlocksPastTheEnd) {
  KvCache cache = MakeCache(6, 4);
  ASSERT_TRUE(cache.Reserve(1, 12).ok());
  const std::vector<int32_t> full = Table(cache, 1);
  ASSERT_TRUE(cache.Truncate(1, 9).ok());  // Still needs 3 blocks.
  EXPECT_EQ(cache.used_blocks(), 3);
  EXPECT_EQ(*cache.Length(1), 9);
  ASSERT_TRUE(cache.Truncate(1, 8).ok());  // Exactly 2 blocks.
  EXPECT_EQ(cache.used_blocks(), 2);
  EXPECT_EQ(Table(cache, 1), std::vector<int32_t>(full.begin(), full.begin() + 2));
  ASSERT_TRUE(cache.Truncate(1, 0).ok());
  EXPECT_EQ(cache.used_blocks(), 0);
  EXPECT_TRUE(cache.Contains(1));
  EXPECT_TRUE(Table(cache, 1).empty());

  EXPECT_EQ(cache.Truncate(1, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Truncate(1, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Truncate(99, 0).code(), absl::StatusCode::kNotFound);
}

TEST(KvCacheTest, ReleaseFreesAllAndUnknownIdsAreNotFound) {
  KvCache cache = MakeCache(6, 4);
  ASSERT_TRUE(cache.Reserve(1, 10).ok());
  ASSERT_TRUE(cache.Reserve(2, 3).ok());
  ASSERT_TRUE(cache.Release(1).ok());
  EXPECT_FALSE(cache.Contains(1));
  EXPECT_EQ(cache.used_blocks(), 1);
  EXPECT_EQ(cache.num_sequences(), 1);
  EXPECT_EQ(cache.Release(1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.Length(1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.BlockTable(1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.SlotOf(1, 0).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(cache.Release(2).ok());
  EXPECT_EQ(cache.free_blocks(), 6);
  EXPECT_EQ(cache.num_sequences(), 0);
}

TEST(KvCacheTest, ReserveRejectsShrinking) {
  KvCache cache = MakeCache(4, 4);
  ASSERT_TRUE(cache.Reserve(1, 5).ok());
  EXPECT_EQ(cache.Reserve(1, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Reserve(2, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(cache.Contains(2));
  EXPECT_EQ(cache.BlocksNeeded(1, 9), 1);
  EXPECT_EQ(cache.BlocksNeeded(1, 3), 0);
  EXPECT_EQ(cache.BlocksNeeded(42, 9), 3);
}

// Random operations checked against a naive model: lengths per sequence, and the
// invariants that blocks are disjoint, cover each length exactly, and are conserved.
TEST(KvCacheTest, RandomOperationsKeepInvariants) {
  constexpr int kBlocks = 20, kBlockSize = 3;
  KvCache cache = MakeCache(kBlocks, kBlockSize);
  std::map<uint64_t, int> lengths;
  std::mt19937 rng(1234);
  for (int step = 0; step < 3000; ++step) {
    const uint64_t seq = rng() % 6;
    const int op = rng() % 4;
    const bool known = lengths.count(seq) > 0;
    if (op <= 1) {
      const int target = (known ? lengths[seq] : 0) + int(rng() % 10);
      int used = 0;
      for (auto& [id, len] : lengths) used += (len + kBlockSize - 1) / kBlockSize;
      const int held = known ? (lengths[seq] + kBlockSize - 1) / kBlockSize : 0;
      const int want = (target + kBlockSize - 1) / kBlockSize;
      const bool fits = want - held <= kBlocks - used;
      absl::Status status = cache.Reserve(seq, target);
      ASSERT_EQ(status.ok(), fits) << status;
      if (fits) lengths[seq] = target;
    } else if (op == 2) {
      const int target = known ? int(rng() % (lengths[seq] + 1)) : 0;
      absl::Status status = cache.Truncate(seq, target);
      ASSERT_EQ(status.ok(), known) << status;
      if (known) lengths[seq] = target;
    } else {
      ASSERT_EQ(cache.Release(seq).ok(), known);
      lengths.erase(seq);
    }
    std::set<int32_t> seen;
    int used = 0;
    for (auto& [id, len] : lengths) {
      ASSERT_EQ(*cache.Length(id), len);
      const std::vector<int32_t> table = Table(cache, id);
      ASSERT_EQ(int(table.size()), (len + kBlockSize - 1) / kBlockSize);
      for (int32_t b : table) {
        ASSERT_TRUE(b >= 0 && b < kBlocks);
        ASSERT_TRUE(seen.insert(b).second) << "block " << b << " shared";
      }
      used += table.size();
    }
    ASSERT_EQ(cache.used_blocks(), used);
    ASSERT_EQ(cache.num_sequences(), int(lengths.size()));
  }
}

TEST(KvCacheTest, ForkSharesThePrefixBlocksWithoutTakingFreeOnes) {
  KvCache cache = MakeCache(8, 4);
  ASSERT_TRUE(cache.Reserve(1, 10).ok());  // 3 blocks, the last one partial.
  const std::vector<int32_t> parent = Table(cache, 1);
  ASSERT_TRUE(cache.Fork(1, 2, 8).ok());
  ASSERT_TRUE(cache.Fork(1, 3, 10).ok());
  EXPECT_EQ(cache.used_blocks(), 3);
  EXPECT_EQ(*cache.Length(2), 8);
  EXPECT_EQ(Table(cache, 2), std::vector<int32_t>(parent.begin(), parent.begin() + 2));
  EXPECT_EQ(Table(cache, 3), parent);
  EXPECT_EQ(cache.RefCount(parent[0]), 3);
  EXPECT_EQ(cache.RefCount(parent[2]), 2);
  // Branch 2 grows into a block of its own: nothing shared is written, nothing copied.
  EXPECT_EQ(cache.BlocksNeeded(2, 9), 1);
  ASSERT_TRUE(cache.Reserve(2, 9).ok());
  EXPECT_TRUE(cache.TakeBlockCopies().empty());
  EXPECT_EQ(cache.used_blocks(), 4);

  EXPECT_EQ(cache.Fork(9, 4, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.Fork(1, 1, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Fork(1, 4, 11).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Fork(1, 4, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(cache.Contains(4));
}

TEST(KvCacheTest, WritingASharedPartialBlockCopiesItFirst) {
  KvCache cache = MakeCache(8, 4);
  ASSERT_TRUE(cache.Reserve(1, 10).ok());
  const std::vector<int32_t> parent = Table(cache, 1);
  ASSERT_TRUE(cache.Fork(1, 2, 10).ok());
  // The branch writes index 10, inside the shared third block: it gets a copy.
  EXPECT_EQ(cache.BlocksNeeded(2, 11), 1);
  ASSERT_TRUE(cache.Reserve(2, 11).ok());
  const std::vector<int32_t> branch = Table(cache, 2);
  EXPECT_EQ(branch[0], parent[0]);
  EXPECT_EQ(branch[1], parent[1]);
  EXPECT_NE(branch[2], parent[2]);
  const std::vector<KvCache::BlockCopy> copies = cache.TakeBlockCopies();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, parent[2]);
  EXPECT_EQ(copies[0].dst, branch[2]);
  EXPECT_TRUE(cache.TakeBlockCopies().empty());
  EXPECT_EQ(Table(cache, 1), parent);
  EXPECT_EQ(cache.RefCount(parent[2]), 1);
  // The parent now owns its partial block alone: growing it copies nothing.
  ASSERT_TRUE(cache.Reserve(1, 12).ok());
  EXPECT_TRUE(cache.TakeBlockCopies().empty());
  // A parent truncated back into a shared block copies it before writing there.
  ASSERT_TRUE(cache.Fork(1, 3, 12).ok());
  ASSERT_TRUE(cache.Truncate(1, 6).ok());
  ASSERT_TRUE(cache.Reserve(1, 7).ok());
  ASSERT_EQ(cache.TakeBlockCopies().size(), 1u);
  EXPECT_NE(Table(cache, 1)[1], Table(cache, 3)[1]);
  EXPECT_EQ(Table(cache, 1)[0], Table(cache, 3)[0]);
  // No room for the copy: RESOURCE_EXHAUSTED and nothing changes.
  KvCache full = MakeCache(2, 4);
  ASSERT_TRUE(full.Reserve(1, 6).ok());
  ASSERT_TRUE(full.Fork(1, 2, 6).ok());
  EXPECT_EQ(full.Reserve(2, 7).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Table(full, 2), Table(full, 1));
  EXPECT_TRUE(full.TakeBlockCopies().empty());
}

TEST(KvCacheTest, ForkingBackFromABranchAdoptsIt) {
  KvCache cache = MakeCache(8, 4);
  ASSERT_TRUE(cache.Reserve(1, 8).ok());
  ASSERT_TRUE(cache.Fork(1, 2, 6).ok());
  ASSERT_TRUE(cache.Reserve(2, 12).ok());  // The branch drafts past the parent.
  (void)cache.TakeBlockCopies();
  const std::vector<int32_t> branch = Table(cache, 2);
  ASSERT_TRUE(cache.Fork(2, 1, 12).ok());  // Sequence 1 adopts the branch...
  ASSERT_TRUE(cache.Release(2).ok());      // ...and the branch id is dropped.
  EXPECT_EQ(Table(cache, 1), branch);
  EXPECT_EQ(*cache.Length(1), 12);
  EXPECT_EQ(cache.used_blocks(), 3);
  ASSERT_TRUE(cache.Release(1).ok());
  EXPECT_EQ(cache.free_blocks(), 8);
}

TEST(KvCacheTest, NetBlocksToRewriteCountsOnlyUnsharedFreesAndTheCopy) {
  KvCache cache = MakeCache(16, 4);
  ASSERT_TRUE(cache.Reserve(1, 12).ok());  // 3 full blocks.
  EXPECT_EQ(cache.NetBlocksToRewrite(1, 12, 13), 1);
  EXPECT_EQ(cache.NetBlocksToRewrite(1, 5, 6), -1);  // Frees the third block.
  EXPECT_EQ(cache.NetBlocksToRewrite(7, 0, 9), 3);   // Unknown: a new sequence.
  ASSERT_TRUE(cache.Fork(1, 2, 12).ok());
  // Truncating 1 to 5 frees nothing now (2 holds the blocks), and writing index 5
  // copies the shared second block.
  EXPECT_EQ(cache.NetBlocksToRewrite(1, 5, 6), 1);
  EXPECT_EQ(cache.NetBlocksToRewrite(1, 8, 8), 0);
  const int free = cache.free_blocks();
  ASSERT_TRUE(cache.Truncate(1, 5).ok());
  ASSERT_TRUE(cache.Reserve(1, 6).ok());
  EXPECT_EQ(free - cache.free_blocks(), 1);
}

// Random forks, growth, truncation and releases: every block's reference count is the
// number of tables holding it, used blocks are the distinct held ones, and dropping
// every branch and sequence frees every block (no leak).
TEST(KvCacheTest, BranchesNeverLeakBlocks) {
  constexpr int kBlocks = 64, kBlockSize = 4;
  KvCache cache = MakeCache(kBlocks, kBlockSize);
  std::mt19937 rng(7);
  std::map<uint64_t, int> lengths;
  for (int step = 0; step < 3000; ++step) {
    const uint64_t seq = rng() % 10;
    const bool known = lengths.count(seq) > 0;
    const int op = rng() % 4;
    if (op == 0) {
      const int target = (known ? lengths[seq] : 0) + int(rng() % 9);
      if (cache.Reserve(seq, target).ok()) lengths[seq] = target;
    } else if (op == 1 && known) {
      ASSERT_TRUE(cache.Truncate(seq, int(rng() % (lengths[seq] + 1))).ok());
      lengths[seq] = *cache.Length(seq);
    } else if (op == 2 && known) {
      const uint64_t child = rng() % 10;
      const int at = int(rng() % (lengths[seq] + 1));
      ASSERT_EQ(cache.Fork(seq, child, at).ok(), child != seq);
      if (child != seq) lengths[child] = at;
    } else if (op == 3) {
      ASSERT_EQ(cache.Release(seq).ok(), known);
      lengths.erase(seq);
    }
    (void)cache.TakeBlockCopies();
    std::map<int32_t, int> holders;
    for (auto& [id, len] : lengths) {
      ASSERT_EQ(*cache.Length(id), len);
      const std::vector<int32_t> table = Table(cache, id);
      ASSERT_EQ(int(table.size()), cache.BlocksFor(len));
      for (int32_t b : table) holders[b] += 1;
    }
    for (auto& [block, count] : holders) ASSERT_EQ(cache.RefCount(block), count) << block;
    ASSERT_EQ(cache.used_blocks(), int(holders.size()));
  }
  for (auto& [id, len] : lengths) ASSERT_TRUE(cache.Release(id).ok());
  EXPECT_EQ(cache.free_blocks(), kBlocks);
  for (int32_t b = 0; b < kBlocks; ++b) EXPECT_EQ(cache.RefCount(b), 0);
}

}  // namespace
}  // namespace tandem
