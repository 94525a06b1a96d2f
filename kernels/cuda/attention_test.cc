// CUDA paged attention against the double-precision reference and the CPU backend
// (decode, verify chains, trees, several sequences, grouped-query heads, head sizes
// up to 256, contexts across chunk boundaries), and its batch invariance.
//
// Tolerance: |gpu - reference| <= 2e-5 + 1e-4 |reference| (float32 scores, softmax and
// value sums over at most a few hundred keys of values in [-1, 1]).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_test_util.h"

namespace tandem {
namespace {

struct SeqSpec {
  int context;
  int rows;
  std::vector<int32_t> parents;
};

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A plan over `specs`, blocks drawn without replacement from a shuffled pool.
StepPlan MakePlan(const std::vector<SeqSpec>& specs, int block_size, int num_blocks,
                  uint32_t seed) {
  std::vector<int32_t> pool(num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(seed));
  StepPlan plan;
  plan.block_size = block_size;
  int row = 0;
  size_t next = 0;
  for (const SeqSpec& spec : specs) {
    StepPlan::Sequence seq;
    seq.row_begin = row;
    seq.row_count = spec.rows;
    seq.context_length = spec.context;
    seq.parents = spec.parents;
    const int blocks = (spec.context + spec.rows + block_size - 1) / block_size;
    for (int b = 0; b < blocks; ++b) seq.block_table.push_back(pool.at(next++));
    for (int i = 0; i < spec.rows; ++i, ++row) {
      const int logical = spec.context + i;
      plan.tokens.push_back(0);
      plan.positions.push_back(logical);
      plan.kv_slots.push_back(int64_t(seq.block_table[logical / block_size]) * block_size +
                              logical % block_size);
    }
    plan.sequences.push_back(seq);
  }
  return plan;
}

class CudaAttentionTest : public cuda::testing::CudaTest {
 protected:
  // Runs the CUDA kernel for `plan` and returns out [rows, heads * head_dim].
  std::vector<float> Run(const StepPlan& plan, const std::vector<float>& q, const KvLayout& layout,
                         const Buffer& k_cache, const Buffer& v_cache, int heads) {
    auto step = backend_->Prepare(plan);
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) return {};
    Buffer dq = ToDevice(q);
    const size_t n = size_t(plan.num_rows()) * heads * layout.head_dim;
    Buffer dout = Zeros(n);
    backend_->Attention(**step, dq.f32(), layout, k_cache.f32(), v_cache.f32(), heads,
                        1.0f / std::sqrt(float(layout.head_dim)), dout.f32());
    return ToHost(dout, n);
  }
};

TEST_F(CudaAttentionTest, MatchesReferenceAndCpu) {
  struct Geometry {
    int heads, kv_heads, head_dim;
  };
  const std::vector<std::vector<SeqSpec>> batches = {
      {{0, 1, {}}},                             // First token.
      {{63, 1, {}}, {64, 1, {}}, {65, 1, {}}},  // Decode across a chunk boundary.
      {{300, 1, {}}},                           // Long decode (5 chunks).
      {{100, 8, {}}},                           // Verify K + 1 = 8.
      {{70, 6, {-1, 0, 0, 1, 1, 2}}},           // Tree.
      {{5, 3, {}}, {129, 1, {}}, {40, 4, {-1, 0, -1, 2}}, {0, 20, {}}},  // Mixed batch.
  };
  CpuBackend cpu(1);
  uint32_t seed = 10;
  for (const Geometry& g : {Geometry{4, 4, 64}, Geometry{8, 2, 128}, Geometry{16, 2, 128},
                            Geometry{12, 1, 20}, Geometry{2, 1, 256}}) {
    KvLayout layout;
    layout.block_size = 16;
    layout.num_blocks = 40;
    layout.num_kv_heads = g.kv_heads;
    layout.head_dim = g.head_dim;
    const size_t cache_floats = layout.BytesPerTensor() / sizeof(float);
    const std::vector<float> k = Random(cache_floats, seed++), v = Random(cache_floats, seed++);
    Buffer dk = ToDevice(k), dv = ToDevice(v);
    for (size_t b = 0; b < batches.size(); ++b) {
      SCOPED_TRACE(::testing::Message() << "heads " << g.heads << "/" << g.kv_heads << " dim "
                                        << g.head_dim << " batch " << b);
      const StepPlan plan = MakePlan(batches[b], layout.block_size, layout.num_blocks, seed++);
      const std::vector<float> q = Random(size_t(plan.num_rows()) * g.heads * g.head_dim, seed++);
      const std::vector<float> got = Run(plan, q, layout, dk, dv, g.heads);
      ASSERT_EQ(got.size(), q.size());
      const float scale = 1.0f / std::sqrt(float(g.head_dim));
      std::vector<float> want(q.size()), cpu_out(q.size());
      reference::Attention(plan, q.data(), layout, k.data(), v.data(), g.heads, scale, want.data());
      auto cpu_step = cpu.Prepare(plan);
      ASSERT_TRUE(cpu_step.ok());
      cpu.Attention(**cpu_step, q.data(), layout, k.data(), v.data(), g.heads, scale,
                    cpu_out.data());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 2e-5 + 1e-4 * std::fabs(want[i])) << "element " << i;
        ASSERT_NEAR(got[i], cpu_out[i], 4e-5 + 2e-4 * std::fabs(want[i])) << "element " << i;
      }
    }
  }
}

TEST_F(CudaAttentionTest, RowsDoNotDependOnTheBatch) {
  KvLayout layout;
  layout.block_size = 16;
  layout.num_blocks = 64;
  layout.num_kv_heads = 2;
  layout.head_dim = 128;
  const int heads = 16;
  const size_t cache_floats = layout.BytesPerTensor() / sizeof(float);
  Buffer dk = ToDevice(Random(cache_floats, 1)), dv = ToDevice(Random(cache_floats, 2));
  const std::vector<SeqSpec> specs = {{200, 1, {}}, {77, 8, {}}, {10, 5, {-1, 0, 1, 0, 3}}};
  const StepPlan together = MakePlan(specs, layout.block_size, layout.num_blocks, 3);
  const size_t width = size_t(heads) * layout.head_dim;
  const std::vector<float> q = Random(size_t(together.num_rows()) * width, 4);
  const std::vector<float> all = Run(together, q, layout, dk, dv, heads);
  for (const StepPlan::Sequence& seq : together.sequences) {
    // The same sequence (same blocks) as a plan of its own.
    StepPlan alone;
    alone.block_size = together.block_size;
    alone.sequences = {seq};
    alone.sequences[0].row_begin = 0;
    for (int i = 0; i < seq.row_count; ++i) {
      alone.tokens.push_back(0);
      alone.positions.push_back(together.positions[seq.row_begin + i]);
      alone.kv_slots.push_back(together.kv_slots[seq.row_begin + i]);
    }
    const std::vector<float> q_alone(q.begin() + seq.row_begin * width,
                                     q.begin() + (seq.row_begin + seq.row_count) * width);
    const std::vector<float> out = Run(alone, q_alone, layout, dk, dv, heads);
    ASSERT_EQ(out.size(), q_alone.size());
    EXPECT_EQ(
        std::memcmp(out.data(), all.data() + seq.row_begin * width, out.size() * sizeof(float)), 0)
        << "sequence at row " << seq.row_begin;
  }
}

}  // namespace
}  // namespace tandem
