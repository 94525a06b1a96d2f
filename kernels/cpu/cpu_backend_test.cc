#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/quantized_tiles.h"
#include "kernels/cpu/reference.h"
#include "kernels/cpu/test_util.h"

namespace tandem {
namespace {

using cpu::SimdLevel;
using cpu::testing::AllClose;
using cpu::testing::BitwiseEqual;
using cpu::testing::RandomVector;

class CpuBackendTest : public ::testing::TestWithParam<SimdLevel> {
 protected:
  CpuBackend backend_{2, GetParam()};
};

TEST_P(CpuBackendTest, Identity) {
  EXPECT_EQ(backend_.name(), "cpu");
  EXPECT_EQ(backend_.num_threads(), 2);
  EXPECT_EQ(backend_.simd_level(), GetParam());
  EXPECT_EQ(MakeCpuBackend(1)->name(), "cpu");
  EXPECT_GE(CpuBackend(0).num_threads(), 1);
}

TEST_P(CpuBackendTest, AllocateIsZeroedAndAligned) {
  for (size_t bytes : {0, 1, 100, 1 << 20}) {
    absl::StatusOr<Buffer> buffer = backend_.Allocate(bytes);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_EQ(buffer->bytes(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % 64, 0u);
    const auto* p = static_cast<const unsigned char*>(buffer->data());
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(p[i], 0) << i;
  }
  absl::StatusOr<Buffer> huge = backend_.Allocate(size_t(1) << 62);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_P(CpuBackendTest, Copies) {
  absl::StatusOr<Buffer> a = backend_.Allocate(16);
  absl::StatusOr<Buffer> b = backend_.Allocate(16);
  ASSERT_TRUE(a.ok() && b.ok());
  const float host[4] = {1, 2, 3, 4};
  float back[4] = {};
  ASSERT_TRUE(backend_.CopyToDevice(host, a->data(), sizeof(host)).ok());
  ASSERT_TRUE(backend_.CopyOnDevice(a->data(), b->data(), sizeof(host)).ok());
  ASSERT_TRUE(backend_.CopyToHost(b->data(), back, sizeof(back)).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back[i], host[i]);
  ASSERT_TRUE(backend_.Synchronize().ok());
  EXPECT_EQ(backend_.CopyToHost(nullptr, back, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_.CopyToDevice(host, nullptr, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend_.CopyOnDevice(nullptr, nullptr, 0).ok());
}

TEST_P(CpuBackendTest, UploadWeight) {
  auto data = std::make_shared<std::vector<float>>(RandomVector(6, 1));
  absl::StatusOr<Weight> f32 = backend_.UploadWeight(data->data(), DType::kF32, 2, 3, data);
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ(f32->data, data->data());  // Zero copy.
  EXPECT_EQ(f32->dtype, DType::kF32);
  EXPECT_EQ(f32->rows, 2);
  EXPECT_EQ(f32->cols, 3);

  for (DType dtype : {DType::kBF16, DType::kF16}) {
    std::vector<uint16_t> half(6);
    for (int i = 0; i < 6; ++i) {
      half[i] = dtype == DType::kBF16 ? cpu::FloatToBf16((*data)[i]) : cpu::FloatToF16((*data)[i]);
    }
    // A matrix stays as stored (zero copy, no float32 copy of the weights).
    absl::StatusOr<Weight> matrix = backend_.UploadWeight(half.data(), dtype, 3, 2, nullptr);
    ASSERT_TRUE(matrix.ok()) << matrix.status();
    EXPECT_EQ(matrix->data, half.data());
    EXPECT_EQ(matrix->dtype, dtype);
    // A vector (a norm weight) is widened once into memory the backend owns.
    absl::StatusOr<Weight> vector = backend_.UploadWeight(half.data(), dtype, 1, 6, nullptr);
    ASSERT_TRUE(vector.ok()) << vector.status();
    half.assign(6, 0);
    EXPECT_EQ(vector->dtype, DType::kF32);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(vector->data) % 64, 0u);
    const float* converted = static_cast<const float*>(vector->data);
    for (int i = 0; i < 6; ++i) {
      EXPECT_NEAR(converted[i], (*data)[i], dtype == DType::kBF16 ? 4e-3 : 5e-4) << i;
    }
  }
  const int8_t quants[4] = {1, -2, 3, 127};
  const uint16_t scales[2] = {cpu::FloatToF16(0.5f), cpu::FloatToF16(0.25f)};
  absl::StatusOr<Weight> q8 = backend_.UploadQ8Weight(quants, scales, 2, 2, nullptr);
  ASSERT_TRUE(q8.ok()) << q8.status();
  EXPECT_EQ(q8->dtype, DType::kQ8_0);
  // A tiled copy (kernels/cpu/quantized_tiles.h), 64-byte aligned, owned by the weight.
  EXPECT_NE(q8->data, static_cast<const void*>(quants));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q8->data) % 64, 0u);
  EXPECT_NE(q8->owner, nullptr);
  const cpu::QuantizedTiles tiles{DType::kQ8_0, static_cast<const uint8_t*>(q8->data), 2, 2};
  for (int o = 0; o < 2; ++o) {
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(tiles.Value(o, k), float(quants[2 * o + k]) * cpu::F16ToFloat(scales[o]));
    }
  }
  EXPECT_EQ(backend_.UploadQ8Weight(quants, nullptr, 2, 2, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_.UploadWeight(quants, DType::kQ8_0, 2, 2, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_.UploadWeight(nullptr, DType::kF32, 2, 2, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_.UploadWeight(data->data(), DType::kF32, -1, 2, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(CpuBackendTest, PrepareRejectsInvalidPlans) {
  StepPlan plan;
  plan.block_size = 4;
  plan.tokens = {1, 2};
  plan.positions = {0, 1};
  plan.kv_slots = {8, 9};
  StepPlan::Sequence seq;
  seq.row_count = 2;
  seq.block_table = {2};
  plan.sequences = {seq};
  absl::StatusOr<std::unique_ptr<PreparedStep>> ok = backend_.Prepare(plan);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->plan().kv_slots, plan.kv_slots);

  StepPlan bad = plan;
  bad.sequences[0].parents = {-1, 1};
  EXPECT_EQ(backend_.Prepare(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = plan;
  bad.positions.pop_back();
  EXPECT_EQ(backend_.Prepare(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(CpuBackendTest, EmbeddingAndGatherRows) {
  const std::vector<float> table = RandomVector(5 * 3, 2);
  absl::StatusOr<Weight> w = backend_.UploadWeight(table.data(), DType::kF32, 5, 3, nullptr);
  ASSERT_TRUE(w.ok());
  StepPlan plan;
  plan.tokens = {4, 0, 4};
  plan.positions = {0, 1, 2};
  plan.kv_slots = {0, 1, 2};
  StepPlan::Sequence seq;
  seq.row_count = 3;
  seq.block_table = {0};
  plan.sequences = {seq};
  auto step = backend_.Prepare(plan);
  ASSERT_TRUE(step.ok()) << step.status();
  std::vector<float> out(9);
  backend_.Embedding(**step, *w, out.data());
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(out[r * 3 + c], table[plan.tokens[r] * 3 + c]);
  }
  // A bf16 table is kept as stored and its rows widened on lookup.
  std::vector<uint16_t> table_bf16(table.size());
  for (size_t i = 0; i < table.size(); ++i) table_bf16[i] = cpu::FloatToBf16(table[i]);
  absl::StatusOr<Weight> w16 =
      backend_.UploadWeight(table_bf16.data(), DType::kBF16, 5, 3, nullptr);
  ASSERT_TRUE(w16.ok());
  std::vector<float> out16(9);
  backend_.Embedding(**step, *w16, out16.data());
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(out16[i], cpu::Bf16ToFloat(table_bf16[plan.tokens[i / 3] * 3 + i % 3]));
  }
  std::vector<float> gathered(6);
  backend_.GatherRows(out.data(), 3, {2, 1}, gathered.data());
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(gathered[c], table[4 * 3 + c]);
    EXPECT_EQ(gathered[3 + c], table[c]);
  }
}

TEST_P(CpuBackendTest, DenseOpsMatchReference) {
  const int rows = 5, dim = 20, out_dim = 9;
  const auto x = RandomVector(rows * dim, 3);
  const auto norm = RandomVector(dim, 4, 0.5f, 1.5f);
  const auto w = RandomVector(out_dim * dim, 5);
  absl::StatusOr<Weight> norm_w = backend_.UploadWeight(norm.data(), DType::kF32, 1, dim, nullptr);
  std::vector<uint16_t> w_bf16(w.size());
  std::vector<float> w_rounded(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w_bf16[i] = cpu::FloatToBf16(w[i]);
    w_rounded[i] = cpu::Bf16ToFloat(w_bf16[i]);
  }
  absl::StatusOr<Weight> mat =
      backend_.UploadWeight(w_bf16.data(), DType::kBF16, out_dim, dim, nullptr);
  ASSERT_TRUE(norm_w.ok() && mat.ok());

  std::vector<float> normed(x.size()), expected(x.size());
  backend_.RmsNorm(x.data(), *norm_w, rows, dim, 1e-5f, normed.data());
  reference::RmsNorm(x.data(), norm.data(), rows, dim, 1e-5f, expected.data());
  EXPECT_TRUE(AllClose(normed, expected, 1e-5f, 1e-6f));

  std::vector<float> product(rows * out_dim), expected_product(rows * out_dim);
  backend_.MatMul(x.data(), rows, *mat, product.data());
  reference::MatMul(x.data(), rows, w_rounded.data(), out_dim, dim, expected_product.data());
  EXPECT_TRUE(AllClose(product, expected_product, 1e-5f, 1e-5f));

  std::vector<float> act(x.size()), expected_act(x.size());
  backend_.SiluMul(x.data(), normed.data(), x.size(), act.data());
  reference::SiluMul(x.data(), normed.data(), x.size(), expected_act.data());
  EXPECT_TRUE(AllClose(act, expected_act, 1e-5f, 1e-7f));

  std::vector<float> sum = x;
  backend_.Add(sum.data(), normed.data(), sum.size());
  for (size_t i = 0; i < sum.size(); ++i) EXPECT_EQ(sum[i], x[i] + normed[i]);
}

// 16-bit KV caches: WriteKv stores each value rounded to nearest even at its slot.
TEST_P(CpuBackendTest, WriteKvRoundsIntoHalfCaches) {
  EXPECT_TRUE(backend_.SupportsKvDType(DType::kF16) && backend_.SupportsKvDType(DType::kBF16));
  EXPECT_FALSE(backend_.SupportsKvDType(DType::kQ8_0));
  StepPlan plan;
  plan.block_size = 4;
  plan.tokens = {1, 2};
  plan.positions = {0, 1};
  plan.kv_slots = {4, 5};
  plan.sequences = {{0, 2, 0, {1}, {}}};
  auto step = backend_.Prepare(plan);
  ASSERT_TRUE(step.ok()) << step.status();
  const std::vector<float> k = RandomVector(12, 9), v = RandomVector(12, 10);
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const KvLayout layout{2, 4, 2, 3, dtype};
    std::vector<uint16_t> k_cache(layout.BytesPerTensor() / 2), v_cache(k_cache.size());
    backend_.WriteKv(**step, k.data(), v.data(), layout, k_cache.data(), v_cache.data());
    for (int i = 0; i < 12; ++i) {
      const auto round = [&](float x) {
        return dtype == DType::kF16 ? cpu::FloatToF16(x) : cpu::FloatToBf16(x);
      };
      EXPECT_EQ(k_cache[4 * 6 + i], round(k[i])) << i;
      EXPECT_EQ(v_cache[4 * 6 + i], round(v[i])) << i;
    }
  }
}

// A two-sequence step through Prepare / Rope / WriteKv / Attention against a dense
// computation over explicit per-sequence key/value lists: sequence A continues a chain
// after 21 cached keys (written by an earlier step), sequence B is a fresh tree.
TEST_P(CpuBackendTest, TwoSequenceStepMatchesDenseAttention) {
  const int num_heads = 4, num_kv_heads = 2, head_dim = 8, block_size = 16;
  const int group = num_heads / num_kv_heads;
  const int kv_width = num_kv_heads * head_dim, q_width = num_heads * head_dim;
  KvLayout layout;
  layout.num_blocks = 6;
  layout.block_size = block_size;
  layout.num_kv_heads = num_kv_heads;
  layout.head_dim = head_dim;
  absl::StatusOr<Buffer> k_cache = backend_.Allocate(layout.BytesPerTensor());
  absl::StatusOr<Buffer> v_cache = backend_.Allocate(layout.BytesPerTensor());
  ASSERT_TRUE(k_cache.ok() && v_cache.ok());
  std::vector<float> inv_freq(head_dim / 2);
  for (int j = 0; j < head_dim / 2; ++j) inv_freq[j] = std::pow(10000.0f, -2.0f * j / head_dim);

  // Dense per-sequence keys/values in logical order (after RoPE on keys).
  std::vector<std::vector<float>> dense_k(2), dense_v(2);
  auto slot_of = [&](const std::vector<int32_t>& table, int logical) {
    return int64_t(table[logical / block_size]) * block_size + logical % block_size;
  };
  const std::vector<int32_t> table_a = {3, 0}, table_b = {5};

  // Step 1: A's first 21 tokens.
  StepPlan prefill;
  prefill.block_size = block_size;
  StepPlan::Sequence a1;
  a1.row_count = 21;
  a1.block_table = table_a;
  prefill.sequences = {a1};
  for (int i = 0; i < 21; ++i) {
    prefill.tokens.push_back(i);
    prefill.positions.push_back(i);
    prefill.kv_slots.push_back(slot_of(table_a, i));
  }
  // Step 2: A's next 3 tokens (chain) and B's 4-node tree.
  StepPlan step;
  step.block_size = block_size;
  StepPlan::Sequence a2;
  a2.row_count = 3;
  a2.context_length = 21;
  a2.block_table = table_a;
  StepPlan::Sequence b;
  b.row_begin = 3;
  b.row_count = 4;
  b.block_table = table_b;
  b.parents = {-1, 0, 0, 2};
  step.sequences = {a2, b};
  const std::vector<int> depth_b = {0, 1, 1, 2};
  for (int i = 0; i < 3; ++i) {
    step.tokens.push_back(7);
    step.positions.push_back(21 + i);
    step.kv_slots.push_back(slot_of(table_a, 21 + i));
  }
  for (int i = 0; i < 4; ++i) {
    step.tokens.push_back(8);
    step.positions.push_back(depth_b[i]);
    step.kv_slots.push_back(slot_of(table_b, i));
  }

  std::vector<float> out;
  std::vector<float> q;
  uint32_t seed = 40;
  for (const StepPlan* plan : {&prefill, &step}) {
    absl::StatusOr<std::unique_ptr<PreparedStep>> prepared = backend_.Prepare(*plan);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    const int rows = plan->num_rows();
    auto k = RandomVector(size_t(rows) * kv_width, seed++);
    const auto v = RandomVector(size_t(rows) * kv_width, seed++);
    q = RandomVector(size_t(rows) * q_width, seed++);
    auto k_expected = k;
    backend_.Rope(**prepared, k.data(), num_kv_heads, head_dim, inv_freq.data());
    backend_.Rope(**prepared, q.data(), num_heads, head_dim, inv_freq.data());
    reference::Rope(plan->positions, k_expected.data(), num_kv_heads, head_dim, inv_freq.data());
    EXPECT_TRUE(AllClose(k, k_expected, 1e-5f, 1e-6f));
    backend_.WriteKv(**prepared, k.data(), v.data(), layout, k_cache->f32(), v_cache->f32());
    for (const StepPlan::Sequence& seq : plan->sequences) {
      const int s = seq.block_table == table_a ? 0 : 1;
      for (int i = 0; i < seq.row_count; ++i) {
        const int r = seq.row_begin + i;
        dense_k[s].insert(dense_k[s].end(), k.begin() + r * kv_width,
                          k.begin() + (r + 1) * kv_width);
        dense_v[s].insert(dense_v[s].end(), v.begin() + r * kv_width,
                          v.begin() + (r + 1) * kv_width);
      }
    }
    out.assign(q.size(), 0.0f);
    backend_.Attention(**prepared, q.data(), layout, k_cache->f32(), v_cache->f32(), num_heads,
                       0.35f, out.data());
  }

  // Dense attention for step 2, masks written out by hand.
  const std::vector<std::vector<int>> visible = {
      // A rows see keys 0..21+i.
      {},
      {},
      {},
      // B tree: node 0 {0}; node 1 {0,1}; node 2 {0,2}; node 3 {0,2,3}.
      {0},
      {0, 1},
      {0, 2},
      {0, 2, 3}};
  std::vector<float> expected(out.size());
  for (int r = 0; r < 7; ++r) {
    const int s = r < 3 ? 0 : 1;
    std::vector<int> keys = visible[r];
    if (s == 0)
      for (int j = 0; j <= 21 + r; ++j) keys.push_back(j);
    for (int h = 0; h < num_heads; ++h) {
      const int kvh = h / group;
      std::vector<double> p;
      double max = -1e300;
      for (int key : keys) {
        double dot = 0;
        for (int d = 0; d < head_dim; ++d) {
          dot += double(q[(r * num_heads + h) * head_dim + d]) *
                 dense_k[s][(key * num_kv_heads + kvh) * head_dim + d];
        }
        p.push_back(0.35 * dot);
        max = std::max(max, p.back());
      }
      double z = 0;
      for (double& e : p) z += (e = std::exp(e - max));
      for (int d = 0; d < head_dim; ++d) {
        double acc = 0;
        for (size_t j = 0; j < keys.size(); ++j) {
          acc += p[j] * dense_v[s][(keys[j] * num_kv_heads + kvh) * head_dim + d];
        }
        expected[(r * num_heads + h) * head_dim + d] = float(acc / z);
      }
    }
  }
  EXPECT_TRUE(AllClose(out, expected, 1e-5f, 2e-6f));

  // Same step on backends with 1 and 4 threads: bitwise equal.
  for (int threads : {1, 4}) {
    CpuBackend other(threads, GetParam());
    auto prepared = other.Prepare(step);
    ASSERT_TRUE(prepared.ok());
    std::vector<float> again(out.size());
    other.Attention(**prepared, q.data(), layout, k_cache->f32(), v_cache->f32(), num_heads, 0.35f,
                    again.data());
    EXPECT_TRUE(BitwiseEqual(again.data(), out.data(), out.size())) << "threads=" << threads;
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, CpuBackendTest, ::testing::ValuesIn(cpu::AvailableSimdLevels()),
                         [](const auto& info) {
                           return std::string(cpu::SimdLevelName(info.param));
                         });

}  // namespace
}  // namespace tandem
