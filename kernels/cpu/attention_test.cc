#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/reference.h"
#include "kernels/cpu/test_util.h"

namespace tandem {
namespace cpu {
namespace {

using testing::AllClose;
using testing::BitwiseEqual;
using testing::RandomVector;

struct SeqSpec {
  int context;
  int rows;
  std::vector<int32_t> parents;  // Empty = chain.
};

// A StepPlan over scattered physical blocks and random K/V caches.
struct Scenario {
  StepPlan plan;
  KvLayout layout;
  std::vector<float> k, v;
};

Scenario MakeScenario(const std::vector<SeqSpec>& specs, int num_kv_heads, int head_dim,
                      int block_size, uint32_t seed) {
  Scenario s;
  s.plan.block_size = block_size;
  int total_blocks = 0;
  for (const SeqSpec& spec : specs) {
    total_blocks += (spec.context + spec.rows + block_size - 1) / block_size;
  }
  std::vector<int32_t> ids(total_blocks + 3);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  int next_id = 0, row = 0;
  for (const SeqSpec& spec : specs) {
    StepPlan::Sequence seq;
    seq.row_begin = row;
    seq.row_count = spec.rows;
    seq.context_length = spec.context;
    seq.parents = spec.parents;
    const int blocks = (spec.context + spec.rows + block_size - 1) / block_size;
    for (int b = 0; b < blocks; ++b) seq.block_table.push_back(ids[next_id++]);
    for (int i = 0; i < spec.rows; ++i) {
      const int logical = spec.context + i;
      s.plan.tokens.push_back(0);
      s.plan.positions.push_back(logical);
      s.plan.kv_slots.push_back(int64_t(seq.block_table[logical / block_size]) * block_size +
                                logical % block_size);
    }
    row += spec.rows;
    s.plan.sequences.push_back(seq);
  }
  EXPECT_TRUE(ValidateStepPlan(s.plan).ok()) << ValidateStepPlan(s.plan);
  s.layout.num_blocks = static_cast<int>(ids.size());
  s.layout.block_size = block_size;
  s.layout.num_kv_heads = num_kv_heads;
  s.layout.head_dim = head_dim;
  const size_t elements = s.layout.BytesPerTensor() / sizeof(float);
  s.k = RandomVector(elements, seed + 1);
  s.v = RandomVector(elements, seed + 2);
  return s;
}

std::vector<float> RunAttention(SimdLevel level, ThreadPool* pool, const Scenario& s,
                                const std::vector<float>& q, int num_heads, float scale) {
  std::vector<float> out(q.size(), -9.0f);
  PagedAttention(level, pool, s.plan, BuildAttentionRows(s.plan), q.data(), s.layout, s.k.data(),
                 s.v.data(), num_heads, scale, out.data());
  return out;
}

class AttentionTest : public ::testing::TestWithParam<SimdLevel> {};

TEST(AttentionRowsTest, ChainAndTreeVisibility) {
  Scenario s = MakeScenario({{3, 2, {}}, {2, 4, {-1, 0, 0, 2}}}, 1, 4, 4, 1);
  const AttentionRows rows = BuildAttentionRows(s.plan);
  EXPECT_EQ(rows.prefix_keys, (std::vector<int32_t>{4, 5, 2, 2, 2, 2}));
  // Tree rows: {2}, {2, 3}, {2, 4}, {2, 4, 5}.
  EXPECT_EQ(rows.extra_keys, (std::vector<int32_t>{2, 2, 3, 2, 4, 2, 4, 5}));
  EXPECT_EQ(rows.extra_begin, (std::vector<int32_t>{0, 0, 0, 1, 3, 5, 8}));
  EXPECT_EQ(rows.max_keys, 5);
  EXPECT_EQ(rows.total_keys, 4 + 5 + 3 + 4 + 4 + 5);
  for (int r = 0; r < 6; ++r) {
    const int seq = rows.sequence[r];
    std::vector<int> keys;
    for (int k = 0; k < rows.prefix_keys[r]; ++k) keys.push_back(k);
    for (int e = rows.extra_begin[r]; e < rows.extra_begin[r + 1]; ++e) {
      keys.push_back(rows.extra_keys[e]);
    }
    EXPECT_EQ(keys,
              reference::VisibleKeys(s.plan.sequences[seq], r - s.plan.sequences[seq].row_begin));
  }
}

TEST_P(AttentionTest, MatchesReference) {
  ThreadPool pool(2);
  const std::vector<SeqSpec> specs = {
      {0, 5, {}},                        // Prefill from scratch.
      {37, 1, {}},                       // Decode, partially filled last block.
      {16, 7, {-1, 0, 0, 1, -1, 4, 2}},  // Tree after exactly one full block.
      {100, 3, {}},                      // Chain over several blocks.
      {5, 4, {-1, -1, 1, 2}},            // Tree with two roots.
  };
  uint32_t seed = 10;
  for (int head_dim : {7, 20, 32, 64, 136}) {
    for (int ratio : {1, 2, 4, 8}) {
      const int num_kv_heads = ratio == 8 ? 1 : 2;
      const int num_heads = ratio * num_kv_heads;
      const Scenario s = MakeScenario(specs, num_kv_heads, head_dim, 16, seed++);
      const auto q =
          RandomVector(size_t(s.plan.num_rows()) * num_heads * head_dim, seed++, -2.0f, 2.0f);
      for (float scale : {1.0f / std::sqrt(float(head_dim)), 0.9f}) {
        std::vector<float> expected(q.size());
        reference::Attention(s.plan, q.data(), s.layout, s.k.data(), s.v.data(), num_heads, scale,
                             expected.data());
        EXPECT_TRUE(AllClose(RunAttention(GetParam(), &pool, s, q, num_heads, scale), expected,
                             1e-5f, 2e-6f))
            << "head_dim=" << head_dim << " ratio=" << ratio << " scale=" << scale;
      }
    }
  }
}

// Row i of a chain of R new rows equals the same query decoded alone after
// context + i keys, bitwise, for R up to 37, with other sequences in the batch and
// 1, 2 or 4 threads.
void CheckChainRowsMatchDecodingAlone(SimdLevel level, int head_dim) {
  const int num_kv_heads = 2, num_heads = 8, block_size = 16;
  const int context = 21, max_rows = 37;
  const Scenario base =
      MakeScenario({{context, max_rows, {}}}, num_kv_heads, head_dim, block_size, 3);
  const StepPlan::Sequence& seq = base.plan.sequences[0];
  const int width = num_heads * head_dim;
  const auto q = RandomVector(size_t(max_rows) * width, 4);
  const float scale = 0.3f;
  // Each row alone: context + i cached keys, one new row.
  std::vector<float> alone(q.size());
  for (int i = 0; i < max_rows; ++i) {
    Scenario single = base;
    StepPlan::Sequence& only = single.plan.sequences[0];
    only.context_length = context + i;
    only.row_count = 1;
    single.plan.tokens = {0};
    single.plan.positions = {context + i};
    single.plan.kv_slots = {base.plan.kv_slots[i]};
    ASSERT_TRUE(ValidateStepPlan(single.plan).ok());
    const std::vector<float> qi(q.begin() + size_t(i) * width, q.begin() + size_t(i + 1) * width);
    const auto out = RunAttention(level, nullptr, single, qi, num_heads, scale);
    std::copy(out.begin(), out.end(), alone.begin() + size_t(i) * width);
  }
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int rows = 1; rows <= max_rows; ++rows) {
      // The chain (first `rows` rows) after an unrelated sequence.
      Scenario batch = base;
      StepPlan& plan = batch.plan;
      plan.tokens.assign(rows + 3, 0);
      plan.positions.assign(rows + 3, 0);
      StepPlan::Sequence other;
      other.row_count = 3;
      other.context_length = 2;
      other.block_table = {static_cast<int32_t>(base.layout.num_blocks - 1)};
      plan.kv_slots = {int64_t(other.block_table[0]) * block_size + 2,
                       int64_t(other.block_table[0]) * block_size + 3,
                       int64_t(other.block_table[0]) * block_size + 4};
      StepPlan::Sequence chain = seq;
      chain.row_begin = 3;
      chain.row_count = rows;
      for (int i = 0; i < rows; ++i) plan.kv_slots.push_back(base.plan.kv_slots[i]);
      plan.sequences = {other, chain};
      ASSERT_TRUE(ValidateStepPlan(plan).ok()) << ValidateStepPlan(plan);
      std::vector<float> qb = RandomVector(size_t(3) * width, 99);
      qb.insert(qb.end(), q.begin(), q.begin() + size_t(rows) * width);
      const auto out = RunAttention(level, &pool, batch, qb, num_heads, scale);
      ASSERT_TRUE(BitwiseEqual(out.data() + size_t(3) * width, alone.data(), size_t(rows) * width))
          << "threads=" << threads << " rows=" << rows << " head_dim=" << head_dim;
    }
  }
}

TEST_P(AttentionTest, ChainRowsMatchDecodingAlone) {
  for (int head_dim : {20, 32}) CheckChainRowsMatchDecodingAlone(GetParam(), head_dim);
}

// A tree sequence's outputs do not depend on the other sequences or the thread count.
TEST_P(AttentionTest, TreeRowsIndependentOfBatchAndThreads) {
  const int num_kv_heads = 2, num_heads = 4, head_dim = 32;
  const SeqSpec tree = {40, 9, {-1, 0, 1, 0, 3, -1, 5, 2, 7}};
  const Scenario alone = MakeScenario({tree}, num_kv_heads, head_dim, 16, 5);
  const int width = num_heads * head_dim;
  const auto q = RandomVector(size_t(tree.rows) * width, 6);
  const auto expected = RunAttention(GetParam(), nullptr, alone, q, num_heads, 0.2f);
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    // Same caches, the tree now second of three sequences.
    Scenario batch = MakeScenario({{3, 2, {}}, tree, {50, 6, {}}}, num_kv_heads, head_dim, 16, 5);
    // Copy the tree's keys and values into its new blocks.
    const auto& from = alone.plan.sequences[0].block_table;
    const auto& to = batch.plan.sequences[1].block_table;
    const size_t block_elems = size_t(16) * num_kv_heads * head_dim;
    for (size_t b = 0; b < from.size(); ++b) {
      std::copy_n(alone.k.begin() + from[b] * block_elems, block_elems,
                  batch.k.begin() + to[b] * block_elems);
      std::copy_n(alone.v.begin() + from[b] * block_elems, block_elems,
                  batch.v.begin() + to[b] * block_elems);
    }
    std::vector<float> qb = RandomVector(size_t(2) * width, 7);
    qb.insert(qb.end(), q.begin(), q.end());
    const auto tail = RandomVector(size_t(6) * width, 8);
    qb.insert(qb.end(), tail.begin(), tail.end());
    const auto out = RunAttention(GetParam(), &pool, batch, qb, num_heads, 0.2f);
    EXPECT_TRUE(BitwiseEqual(out.data() + size_t(2) * width, expected.data(), expected.size()))
        << "threads=" << threads;
  }
}

// 16-bit caches give bitwise the float32 attention over their widened values, for a
// chain and a tree, head dims with and without an 8-lane tail.
TEST_P(AttentionTest, HalfCachesEqualFloat32OnWidenedValues) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (int head_dim : {20, 32}) {
      Scenario s = MakeScenario({{37, 3, {}}, {20, 4, {-1, 0, 0, 2}}}, 2, head_dim, 16, 11);
      std::vector<uint16_t> k16(s.k.size()), v16(s.v.size());
      for (size_t i = 0; i < s.k.size(); ++i) {
        k16[i] = dtype == DType::kF16 ? FloatToF16(s.k[i]) : FloatToBf16(s.k[i]);
        v16[i] = dtype == DType::kF16 ? FloatToF16(s.v[i]) : FloatToBf16(s.v[i]);
        s.k[i] = dtype == DType::kF16 ? F16ToFloat(k16[i]) : Bf16ToFloat(k16[i]);
        s.v[i] = dtype == DType::kF16 ? F16ToFloat(v16[i]) : Bf16ToFloat(v16[i]);
      }
      const int num_heads = 4;
      const auto q = RandomVector(size_t(7) * num_heads * head_dim, 12);
      const auto expected = RunAttention(GetParam(), nullptr, s, q, num_heads, 0.3f);
      KvLayout half_layout = s.layout;
      half_layout.dtype = dtype;
      std::vector<float> out(q.size(), -9.0f);
      ThreadPool pool(2);
      PagedAttention(GetParam(), &pool, s.plan, BuildAttentionRows(s.plan), q.data(), half_layout,
                     k16.data(), v16.data(), num_heads, 0.3f, out.data());
      EXPECT_TRUE(BitwiseEqual(out.data(), expected.data(), out.size()))
          << DTypeName(dtype) << " head_dim=" << head_dim;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, AttentionTest, ::testing::ValuesIn(AvailableSimdLevels()),
                         [](const auto& info) { return std::string(SimdLevelName(info.param)); });

}  // namespace
}  // namespace cpu
}  // namespace tandem
