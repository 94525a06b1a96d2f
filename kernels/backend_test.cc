#include "kernels/backend.h"

#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(DTypeSizeTest, Sizes) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
}

// Two sequences: a 3-row chain after 5 cached keys (blocks 2, 0) and a 2-row tree.
StepPlan ValidPlan() {
  StepPlan plan;
  plan.block_size = 4;
  StepPlan::Sequence chain;
  chain.row_count = 3;
  chain.context_length = 5;
  chain.block_table = {2, 0};
  StepPlan::Sequence tree;
  tree.row_begin = 3;
  tree.row_count = 2;
  tree.block_table = {1};
  tree.parents = {-1, -1};
  plan.sequences = {chain, tree};
  plan.tokens = {1, 2, 3, 4, 5};
  plan.positions = {5, 6, 7, 0, 0};
  plan.kv_slots = {1, 2, 3, 4, 5};  // Logical 5,6,7 live in block 0; tree in block 1.
  plan.logit_rows = {2, 3, 4};
  return plan;
}

void ExpectInvalid(const StepPlan& plan, const std::string& fragment) {
  const absl::Status status = ValidateStepPlan(plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << fragment;
  EXPECT_NE(status.message().find(fragment), absl::string_view::npos) << status;
}

TEST(ValidateStepPlanTest, AcceptsConsistentPlans) {
  EXPECT_TRUE(ValidateStepPlan(ValidPlan()).ok()) << ValidateStepPlan(ValidPlan());
  EXPECT_TRUE(ValidateStepPlan(StepPlan()).ok());
}

TEST(ValidateStepPlanTest, RejectsEachInconsistency) {
  StepPlan p = ValidPlan();
  p.block_size = 0;
  ExpectInvalid(p, "block_size");
  p = ValidPlan();
  p.positions.pop_back();
  ExpectInvalid(p, "positions");
  p = ValidPlan();
  p.kv_slots.push_back(0);
  ExpectInvalid(p, "kv_slots has");
  p = ValidPlan();
  p.tokens[1] = -3;
  ExpectInvalid(p, "tokens[1]");
  p = ValidPlan();
  p.sequences[1].row_begin = 4;
  ExpectInvalid(p, "row_begin");
  p = ValidPlan();
  p.sequences[1].row_count = 1;
  p.sequences[1].parents = {-1};
  ExpectInvalid(p, "cover 4 of 5 rows");
  p = ValidPlan();
  p.sequences[1].row_count = 7;
  ExpectInvalid(p, "row_count");
  p = ValidPlan();
  p.sequences[0].context_length = -1;
  ExpectInvalid(p, "context_length");
  p = ValidPlan();
  p.sequences[0].block_table = {2};
  ExpectInvalid(p, "cannot hold 8 keys");
  p = ValidPlan();
  p.sequences[1].block_table = {-1};
  ExpectInvalid(p, "negative");
  p = ValidPlan();
  p.sequences[1].parents = {-1};
  ExpectInvalid(p, "parents has 1 entries");
  p = ValidPlan();
  p.sequences[1].parents = {-1, 1};
  ExpectInvalid(p, "parents[1] = 1");
  p = ValidPlan();
  p.sequences[1].parents = {-2, 0};
  ExpectInvalid(p, "parents[0] = -2");
  p = ValidPlan();
  p.kv_slots[1] = 9;
  ExpectInvalid(p, "kv_slots[1] = 9");
  p = ValidPlan();
  p.logit_rows = {3, 2};
  ExpectInvalid(p, "ascending");
  p = ValidPlan();
  p.logit_rows = {5};
  ExpectInvalid(p, "logit_rows[0] = 5");
}

}  // namespace
}  // namespace tandem
