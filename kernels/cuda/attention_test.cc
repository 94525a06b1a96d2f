// CUDA paged attention against the double-precision reference and the CPU backend
// (decode, verify chains, trees, several sequences, grouped-query heads, head sizes
// up to 256, contexts across chunk boundaries), its batch invariance, and 16-bit
// caches (f16, bf16): written with the CPU's rounding, read as the float32 cache of the
// rounded values.
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
#include "kernels/cpu/half.h"
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
    backend_->Attention(**step, dq.f32(), layout, k_cache.data(), v_cache.data(), heads,
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

// Host rounding of `dtype` (f16 or bf16) and its exact widening.
uint16_t Narrow(DType dtype, float x) {
  return dtype == DType::kF16 ? cpu::FloatToF16(x) : cpu::FloatToBf16(x);
}
float Widen(DType dtype, uint16_t h) {
  return dtype == DType::kF16 ? cpu::F16ToFloat(h) : cpu::Bf16ToFloat(h);
}

TEST_F(CudaAttentionTest, SixteenBitCachesAreTheRoundedFloatCache) {
  const int heads = 8;
  const std::vector<SeqSpec> specs = {{130, 1, {}}, {40, 5, {}}, {9, 4, {-1, 0, 0, 1}}};
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    KvLayout layout;
    layout.block_size = 16;
    layout.num_blocks = 24;
    layout.num_kv_heads = 2;
    layout.head_dim = 64;
    layout.dtype = dtype;
    KvLayout float_layout = layout;
    float_layout.dtype = DType::kF32;
    const size_t elements = layout.BytesPerTensor() / sizeof(uint16_t);
    const StepPlan plan = MakePlan(specs, layout.block_size, layout.num_blocks, 5);
    const size_t width = size_t(layout.num_kv_heads) * layout.head_dim;

    // WriteKv rounds as the CPU does, special values included.
    std::vector<float> k_new = Random(size_t(plan.num_rows()) * width, 6);
    const std::vector<float> v_new = Random(k_new.size(), 7);
    const float specials[] = {1e-6f, 7e4f,  65519.0f,       65520.0f,
                              -0.0f, 3e-8f, 1.00048828125f, std::nanf("")};
    std::copy(std::begin(specials), std::end(specials), k_new.begin());
    auto step = backend_->Prepare(plan);
    ASSERT_TRUE(step.ok()) << step.status();
    auto k_cache = backend_->Allocate(elements * sizeof(uint16_t));
    auto v_cache = backend_->Allocate(elements * sizeof(uint16_t));
    ASSERT_TRUE(k_cache.ok() && v_cache.ok());
    Buffer dk_new = ToDevice(k_new), dv_new = ToDevice(v_new);
    backend_->WriteKv(**step, dk_new.f32(), dv_new.f32(), layout, k_cache->data(), v_cache->data());
    const std::vector<uint16_t> k_bits = ToHost<uint16_t>(*k_cache, elements);
    const std::vector<uint16_t> v_bits = ToHost<uint16_t>(*v_cache, elements);
    for (int r = 0; r < plan.num_rows(); ++r) {
      for (size_t i = 0; i < width; ++i) {
        const size_t slot = size_t(plan.kv_slots[r]) * width + i, row = size_t(r) * width + i;
        ASSERT_EQ(k_bits[slot], Narrow(dtype, k_new[row])) << "row " << r << " element " << i;
        ASSERT_EQ(v_bits[slot], Narrow(dtype, v_new[row])) << "row " << r << " element " << i;
      }
    }

    // Attention over a 16-bit cache is bitwise attention over its widened values.
    std::vector<uint16_t> k16(elements), v16(elements);
    const std::vector<float> k = Random(elements, 8), v = Random(elements, 9);
    std::vector<float> k_wide(elements), v_wide(elements);
    for (size_t i = 0; i < elements; ++i) {
      k16[i] = Narrow(dtype, k[i]);
      v16[i] = Narrow(dtype, v[i]);
      k_wide[i] = Widen(dtype, k16[i]);
      v_wide[i] = Widen(dtype, v16[i]);
    }
    const std::vector<float> q = Random(size_t(plan.num_rows()) * heads * layout.head_dim, 10);
    const std::vector<float> narrow = Run(plan, q, layout, ToDevice(k16), ToDevice(v16), heads);
    const std::vector<float> wide =
        Run(plan, q, float_layout, ToDevice(k_wide), ToDevice(v_wide), heads);
    ASSERT_EQ(narrow.size(), q.size());
    ASSERT_EQ(wide.size(), q.size());
    EXPECT_EQ(std::memcmp(narrow.data(), wide.data(), q.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace tandem
