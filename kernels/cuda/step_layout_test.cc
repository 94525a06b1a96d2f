// Checks the packed step arrays against the reference mask (reference::VisibleKeys)
// and the plan's own arrays. Runs on every machine (host code only).
#include "kernels/cuda/step_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/reference.h"

namespace tandem {
namespace cuda {
namespace {

// A plan of sequences given as (context_length, row_count, parents), blocks assigned
// in reverse order so that physical and logical positions differ.
StepPlan MakePlan(int block_size,
                  const std::vector<std::tuple<int, int, std::vector<int32_t>>>& sequences) {
  StepPlan plan;
  plan.block_size = block_size;
  int next_block = 1000;
  int row = 0;
  for (const auto& [context, count, parents] : sequences) {
    StepPlan::Sequence seq;
    seq.row_begin = row;
    seq.row_count = count;
    seq.context_length = context;
    seq.parents = parents;
    const int keys = context + count;
    for (int b = 0; b < (keys + block_size - 1) / block_size; ++b) {
      seq.block_table.push_back(next_block--);
    }
    for (int i = 0; i < count; ++i) {
      const int logical = context + i;
      plan.tokens.push_back(7 * row + 3);
      plan.positions.push_back(logical);
      plan.kv_slots.push_back(int64_t(seq.block_table[logical / block_size]) * block_size +
                              logical % block_size);
      ++row;
    }
    plan.sequences.push_back(seq);
  }
  return plan;
}

// The keys row r sees according to the layout.
std::vector<int> LayoutKeys(const StepLayout& l, int r) {
  std::vector<int> keys;
  for (int k = 0; k < l.Array<int32_t>(l.row_prefix)[r]; ++k) keys.push_back(k);
  const int32_t* begin = l.Array<int32_t>(l.row_extra_begin);
  for (int e = begin[r]; e < begin[r + 1]; ++e) keys.push_back(l.Array<int32_t>(l.extra_keys)[e]);
  return keys;
}

void ExpectMatchesPlan(const StepPlan& plan, int chunk_keys) {
  auto layout = BuildStepLayout(plan, chunk_keys);
  ASSERT_TRUE(layout.ok()) << layout.status();
  const StepLayout& l = *layout;
  ASSERT_EQ(l.rows, plan.num_rows());
  EXPECT_EQ(l.blob.size() % 16, 0u);
  int max_keys = 0, chunks = 0;
  for (const StepPlan::Sequence& seq : plan.sequences) {
    for (int i = 0; i < seq.row_count; ++i) {
      const int r = seq.row_begin + i;
      const std::vector<int> expected = reference::VisibleKeys(seq, i);
      EXPECT_EQ(LayoutKeys(l, r), expected) << "row " << r;
      const int row_chunks = (int(expected.size()) + chunk_keys - 1) / chunk_keys;
      EXPECT_EQ(l.Array<int32_t>(l.row_chunk_begin)[r], chunks);
      for (int c = 0; c < row_chunks; ++c) EXPECT_EQ(l.Array<int32_t>(l.chunk_row)[chunks + c], r);
      chunks += row_chunks;
      max_keys = std::max<int>(max_keys, expected.size());
      // The row's block table as the kernels address it.
      const int32_t offset = l.Array<int32_t>(l.row_table_offset)[r];
      for (size_t b = 0; b < seq.block_table.size(); ++b) {
        EXPECT_EQ(l.Array<int32_t>(l.block_tables)[offset + b], seq.block_table[b]);
      }
      EXPECT_EQ(l.Array<int64_t>(l.kv_slots)[r], plan.kv_slots[r]);
      EXPECT_EQ(l.Array<int32_t>(l.tokens)[r], plan.tokens[r]);
      EXPECT_EQ(l.Array<int32_t>(l.positions)[r], plan.positions[r]);
    }
  }
  EXPECT_EQ(l.Array<int32_t>(l.row_chunk_begin)[l.rows], chunks);
  EXPECT_EQ(l.total_chunks, chunks);
  EXPECT_EQ(l.max_keys, max_keys);
  EXPECT_EQ(l.max_token, *std::max_element(plan.tokens.begin(), plan.tokens.end()));
  EXPECT_EQ(l.max_slot, *std::max_element(plan.kv_slots.begin(), plan.kv_slots.end()));
}

TEST(StepLayoutTest, DecodeAndVerifyChains) {
  ExpectMatchesPlan(MakePlan(16, {{37, 1, {}}, {0, 5, {}}, {130, 8, {}}}), 64);
}

TEST(StepLayoutTest, ChunkBoundaries) {
  // Rows whose key counts straddle chunk boundaries (63, 64, 65 keys).
  ExpectMatchesPlan(MakePlan(4, {{62, 3, {}}}), 64);
  ExpectMatchesPlan(MakePlan(4, {{62, 3, {}}}), 1);
}

TEST(StepLayoutTest, TreeRowsSeeTheirAncestors) {
  // Tree: 0 -> {1, 2}, 1 -> {3, 4}, 2 -> {5}.
  ExpectMatchesPlan(MakePlan(8, {{20, 6, {-1, 0, 0, 1, 1, 2}}, {3, 2, {}}}), 64);
  // Several roots (parents -1) and a deep chain through a tree.
  ExpectMatchesPlan(MakePlan(2, {{5, 5, {-1, -1, 1, 2, 0}}}), 4);
}

TEST(StepLayoutTest, LargestBlockId) {
  const StepPlan plan = MakePlan(16, {{40, 2, {}}});
  auto layout = BuildStepLayout(plan, 64);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->max_block_id, 1000);
  EXPECT_EQ(layout->num_extra_keys, 0);
}

TEST(StepLayoutTest, RejectsInvalidPlansAndChunkSizes) {
  StepPlan plan = MakePlan(16, {{4, 2, {}}});
  plan.kv_slots[1] += 1;
  auto bad = BuildStepLayout(plan, 64);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("kv_slots"), std::string::npos) << bad.status();
  EXPECT_EQ(BuildStepLayout(MakePlan(16, {{4, 2, {}}}), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StepLayoutTest, EmptyPlan) {
  StepPlan plan;
  auto layout = BuildStepLayout(plan, 64);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->rows, 0);
  EXPECT_EQ(layout->total_chunks, 0);
  EXPECT_GT(layout->blob.size(), 0u);  // Never a zero-byte upload.
}

}  // namespace
}  // namespace cuda
}  // namespace tandem
