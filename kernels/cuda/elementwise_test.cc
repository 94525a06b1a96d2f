// CUDA RMSNorm, RoPE, SiLU-mul, add, embedding, KV write and row gather against the
// CPU backend on random inputs. Weights are bf16 on the GPU, so the CPU side uses the
// same bf16-rounded values. Tolerances:
//  * Add, Embedding, WriteKv, GatherRows: bitwise equal (pure copies / one rounding).
//  * RoPE: 2e-6 absolute (same float products; cos/sin may differ in the last bit).
//  * RMSNorm: 1e-5 relative + 1e-7 (different summation order of the squares).
//  * SiLU-mul: 2e-6 relative + 1e-7 (device expf vs the CPU's exp, each a few ulp).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/half.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_test_util.h"

namespace tandem {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> RoundedToBf16(std::vector<float> v) {
  for (float& x : v) x = cpu::Bf16ToFloat(cpu::FloatToBf16(x));
  return v;
}

// A chain plan: one sequence of `rows` new tokens after `context` cached ones.
StepPlan ChainPlan(int context, int rows, int vocab) {
  StepPlan plan;
  plan.block_size = 8;
  StepPlan::Sequence seq;
  seq.row_count = rows;
  seq.context_length = context;
  for (int b = 0; b < (context + rows + 7) / 8; ++b) seq.block_table.push_back(3 * b + 1);
  for (int i = 0; i < rows; ++i) {
    const int logical = context + i;
    plan.tokens.push_back((i * 7919 + 13) % vocab);
    plan.positions.push_back(logical * 37);  // Large positions exercise the angles.
    plan.kv_slots.push_back(int64_t(seq.block_table[logical / 8]) * 8 + logical % 8);
  }
  plan.sequences = {seq};
  return plan;
}

class CudaElementwiseTest : public cuda::testing::CudaTest {
 protected:
  CpuBackend cpu_{1};
};

TEST_F(CudaElementwiseTest, RmsNorm) {
  for (int dim : {1, 7, 256, 1000, 8192}) {
    const int rows = 5;
    const std::vector<float> x = Random(size_t(rows) * dim, dim);
    const std::vector<float> w = Random(dim, dim + 1, 0.5f, 1.5f);
    Buffer dx = ToDevice(x), dout = Zeros(x.size());
    backend_->RmsNorm(dx.f32(), UploadF32(w, 1, dim), rows, dim, 1e-5f, dout.f32());
    const std::vector<float> got = ToHost(dout, x.size());
    const std::vector<float> w16 = RoundedToBf16(w);
    auto cpu_w = cpu_.UploadWeight(w16.data(), DType::kF32, 1, dim, nullptr);
    std::vector<float> want(x.size());
    cpu_.RmsNorm(x.data(), *cpu_w, rows, dim, 1e-5f, want.data());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-7 + 1e-5 * std::fabs(want[i])) << "dim " << dim << " i " << i;
    }
  }
}

TEST_F(CudaElementwiseTest, Rope) {
  const int rows = 9, heads = 3;
  for (int head_dim : {2, 20, 128}) {
    const StepPlan plan = ChainPlan(100, rows, 50);
    auto step = backend_->Prepare(plan);
    auto cpu_step = cpu_.Prepare(plan);
    ASSERT_TRUE(step.ok() && cpu_step.ok());
    std::vector<float> inv_freq(head_dim / 2);
    for (int j = 0; j < head_dim / 2; ++j) inv_freq[j] = std::pow(10000.0f, -2.0f * j / head_dim);
    std::vector<float> x = Random(size_t(rows) * heads * head_dim, head_dim);
    Buffer dx = ToDevice(x);
    backend_->Rope(**step, dx.f32(), heads, head_dim, inv_freq.data());
    backend_->Rope(**step, dx.f32(), heads, head_dim, inv_freq.data());  // Cached frequencies.
    cpu_.Rope(**cpu_step, x.data(), heads, head_dim, inv_freq.data());
    cpu_.Rope(**cpu_step, x.data(), heads, head_dim, inv_freq.data());
    const std::vector<float> got = ToHost(dx, x.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], x[i], 2e-6) << head_dim << " " << i;
  }
}

TEST_F(CudaElementwiseTest, SiluMulAndAdd) {
  const size_t n = 100003;
  const std::vector<float> g = Random(n, 1, -20.0f, 20.0f), u = Random(n, 2);
  Buffer dg = ToDevice(g), du = ToDevice(u), dout = Zeros(n);
  backend_->SiluMul(dg.f32(), du.f32(), n, dout.f32());
  std::vector<float> want(n);
  cpu_.SiluMul(g.data(), u.data(), n, want.data());
  const std::vector<float> got = ToHost(dout, n);
  for (size_t i = 0; i < n; ++i)
    ASSERT_NEAR(got[i], want[i], 1e-7 + 2e-6 * std::fabs(want[i])) << i;

  backend_->Add(dg.f32(), du.f32(), n);
  std::vector<float> sum = g;
  cpu_.Add(sum.data(), u.data(), n);
  EXPECT_EQ(ToHost(dg, n), sum);
}

TEST_F(CudaElementwiseTest, EmbeddingWriteKvAndGatherRows) {
  const int vocab = 50, dim = 24, rows = 6;
  const std::vector<float> table = Random(size_t(vocab) * dim, 3);
  const StepPlan plan = ChainPlan(13, rows, vocab);
  auto step = backend_->Prepare(plan);
  ASSERT_TRUE(step.ok()) << step.status();

  Buffer emb = Zeros(size_t(rows) * dim);
  backend_->Embedding(**step, UploadF32(table, vocab, dim), emb.f32());
  const std::vector<float> table16 = RoundedToBf16(table);
  std::vector<float> want(size_t(rows) * dim);
  for (int r = 0; r < rows; ++r) {
    std::copy_n(table16.begin() + size_t(plan.tokens[r]) * dim, dim,
                want.begin() + size_t(r) * dim);
  }
  EXPECT_EQ(ToHost(emb, want.size()), want);

  KvLayout layout;
  layout.block_size = 8;
  layout.num_blocks = 20;
  layout.num_kv_heads = 2;
  layout.head_dim = 6;
  const size_t width = 12, cache = layout.BytesPerTensor() / sizeof(float);
  const std::vector<float> k = Random(size_t(rows) * width, 4), v = Random(size_t(rows) * width, 5);
  Buffer dk = ToDevice(k), dv = ToDevice(v), kc = Zeros(cache), vc = Zeros(cache);
  backend_->WriteKv(**step, dk.f32(), dv.f32(), layout, kc.f32(), vc.f32());
  std::vector<float> want_k(cache, 0.0f), want_v(cache, 0.0f);
  auto cpu_step = cpu_.Prepare(plan);
  cpu_.WriteKv(**cpu_step, k.data(), v.data(), layout, want_k.data(), want_v.data());
  EXPECT_EQ(ToHost(kc, cache), want_k);
  EXPECT_EQ(ToHost(vc, cache), want_v);

  // Runs of consecutive rows, repeats and out-of-order rows.
  const std::vector<int32_t> picks = {4, 5, 0, 2, 3, 3, 1};
  Buffer gathered = Zeros(picks.size() * dim);
  backend_->GatherRows(emb.f32(), dim, picks, gathered.f32());
  std::vector<float> want_rows(picks.size() * dim);
  cpu_.GatherRows(want.data(), dim, picks, want_rows.data());
  EXPECT_EQ(ToHost(gathered, want_rows.size()), want_rows);
}

}  // namespace
}  // namespace tandem
