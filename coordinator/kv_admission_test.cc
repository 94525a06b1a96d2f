#include "coordinator/kv_admission.h"

#include <gtest/gtest.h>

namespace tandem::coordinator {
namespace {

// Blocks of 16 tokens; max_k 8, so a sequence reserves prompt + max_new + 9 tokens.
KvAdmission Policy(int target_blocks, int draft_blocks, bool has_draft = true) {
  KvAdmission kv(8);
  kv.SetTarget({16, target_blocks});
  kv.SetDraft({16, draft_blocks}, has_draft);
  return kv;
}

TEST(KvAdmissionTest, BlocksCoverPromptNewTokensAndSpeculativePositions) {
  KvAdmission kv = Policy(100, 100);
  EXPECT_EQ(kv.TargetBlocks(7, 0), 1);     // 7 + 0 + 9 = 16 tokens.
  EXPECT_EQ(kv.TargetBlocks(8, 0), 2);     // 17 tokens.
  EXPECT_EQ(kv.DraftBlocks(100, 50), 10);  // 159 tokens.
  EXPECT_EQ(Policy(100, 100, /*has_draft=*/false).DraftBlocks(100, 50), 0);
}

// Each pre-drafting branch holds at most max_k + 2 positions of its own past a shared
// prefix, one of them in a copied partial block: ceil(10 / 16) + 1 = 2 blocks at max_k 8.
TEST(KvAdmissionTest, DraftBranchesReserveTheirOwnBlocksOnTheDraftOnly) {
  KvAdmission kv(8, /*draft_branches=*/3);
  kv.SetTarget({16, 100});
  kv.SetDraft({16, 100}, true);
  EXPECT_EQ(kv.TargetBlocks(100, 50), 10);
  EXPECT_EQ(kv.DraftBlocks(100, 50), 10 + 3 * 2);
}

TEST(KvAdmissionTest, RefusesWhatCanNeverFitTheTargetWithTheNumbers) {
  KvAdmission kv = Policy(10, 100);
  EXPECT_TRUE(kv.CheckFitsTarget(100, 50).ok());  // 10 blocks.
  absl::Status s = kv.CheckFitsTarget(100, 52);   // 161 tokens: 11 blocks.
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("needs 11 KV blocks"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("holds 10"), absl::string_view::npos) << s;
}

TEST(KvAdmissionTest, WaitsForTargetRoomAndRunsWithoutTheDraftWhenOnlyItIsFull) {
  KvAdmission kv = Policy(20, 12);
  // 10 blocks each side.
  KvAdmission::Decision d = kv.Decide(100, 50, /*target_used=*/10, /*draft_used=*/0);
  EXPECT_TRUE(d.admit);
  EXPECT_TRUE(d.use_draft);
  d = kv.Decide(100, 50, /*target_used=*/11, /*draft_used=*/0);
  EXPECT_FALSE(d.admit);  // Target full: wait.
  d = kv.Decide(100, 50, /*target_used=*/0, /*draft_used=*/3);
  EXPECT_TRUE(d.admit);  // The draft has no room: target-only instead of blocking.
  EXPECT_FALSE(d.use_draft);
  // Larger than the draft's whole cache: never uses it, never waits for it.
  d = Policy(100, 5).Decide(100, 50, 0, 0);
  EXPECT_TRUE(d.admit);
  EXPECT_FALSE(d.use_draft);
}

TEST(KvAdmissionTest, UnknownCapacityEnforcesNothing) {
  KvAdmission kv(8);
  kv.SetDraft({}, true);
  EXPECT_TRUE(kv.CheckFitsTarget(100000, 100000).ok());
  KvAdmission::Decision d = kv.Decide(100000, 100000, 0, 0);
  EXPECT_TRUE(d.admit);
  EXPECT_TRUE(d.use_draft);
}

}  // namespace
}  // namespace tandem::coordinator
