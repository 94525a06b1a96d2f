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

}  // namespace
}  // namespace tandem
