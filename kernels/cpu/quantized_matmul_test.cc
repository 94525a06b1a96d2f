#include "kernels/cpu/quantized_matmul.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/test_util.h"

namespace tandem {
namespace cpu {
namespace {

using testing::BitwiseEqual;
using testing::RandomVector;

// ---- naive references, written from the contract in quantized_matmul.h ----

// One block of activations: scale m / 127 and quants nearbyint(x * (1 / scale)).
void ReferenceQuantizeBlock(const float* x, int n, int8_t* q, float* scale) {
  float m = 0.0f;
  bool finite = true;
  for (int i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    m = std::max(m, std::fabs(x[i]));
  }
  if (!finite) {
    *scale = std::numeric_limits<float>::quiet_NaN();
    for (int i = 0; i < n; ++i) q[i] = 0;
    return;
  }
  *scale = m / 127.0f;
  const float inverse = m == 0.0f ? 0.0f : 1.0f / *scale;
  for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] * inverse));
}

struct Q8Weight {
  int out_dim, in_dim, blocks;
  std::vector<int8_t> quants;     // [out_dim, in_dim]
  std::vector<uint16_t> scales;   // f16 [out_dim, blocks]
  float Value(int o, int k) const {
    return float(quants[size_t(o) * in_dim + k]) * F16ToFloat(scales[size_t(o) * blocks + k / 32]);
  }
};

Q8Weight RandomQ8Weight(int out_dim, int in_dim, uint32_t seed) {
  Q8Weight w{out_dim, in_dim, (in_dim + 31) / 32, {}, {}};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> quant(-127, 127);
  for (int64_t i = 0; i < int64_t(out_dim) * in_dim; ++i) w.quants.push_back(int8_t(quant(rng)));
  for (float s : RandomVector(size_t(out_dim) * w.blocks, seed + 1, 1e-3f, 0.05f)) {
    w.scales.push_back(FloatToF16(s));
  }
  return w;
}

// out[r, o] by the documented order: per block, lane j sums the products at 4j..4j+3;
// acc_j = fma(lane sum, d_w * d_x, acc_j); then (a0+a4 + a1+a5) + (a2+a6 + a3+a7).
std::vector<float> ReferenceMatMul(const std::vector<float>& x, int rows, const Q8Weight& w) {
  std::vector<float> out(size_t(rows) * w.out_dim);
  std::vector<int8_t> xq(32);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < w.out_dim; ++o) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int b = 0; b < w.blocks; ++b) {
        const int k0 = 32 * b, n = std::min(32, w.in_dim - k0);
        float dx;
        ReferenceQuantizeBlock(&x[size_t(r) * w.in_dim + k0], n, xq.data(), &dx);
        const float d = F16ToFloat(w.scales[size_t(o) * w.blocks + b]) * dx;
        for (int j = 0; j < 8; ++j) {
          int sum = 0;
          for (int i = 4 * j; i < 4 * j + 4 && i < n; ++i) {
            sum += int(w.quants[size_t(o) * w.in_dim + k0 + i]) * int(xq[i]);
          }
          acc[j] = std::fma(float(sum), d, acc[j]);
        }
      }
      out[size_t(r) * w.out_dim + o] =
          ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
  }
  return out;
}

std::vector<float> RunQ8(SimdLevel level, const std::vector<float>& x, int rows,
                         const Q8Weight& w) {
  QuantizedRows quantized;
  QuantizeRows(level, x.data(), rows, w.in_dim, &quantized);
  std::vector<float> out(size_t(rows) * w.out_dim, -7.0f);
  Q8MatMulRange(level, quantized, w.quants.data(), w.scales.data(), w.out_dim, 0, w.out_dim,
                out.data());
  return out;
}

class QuantizedMatMulTest : public ::testing::TestWithParam<SimdLevel> {};

// Quants and scales equal the reference's bitwise, rows are zero-padded, and every value
// is within half a step of its block (|x - q * d| <= d / 2, |q| <= 127).
TEST_P(QuantizedMatMulTest, QuantizeRowsMatchesReference) {
  for (int cols : {1, 7, 31, 32, 33, 100, 688}) {
    const int rows = 3;
    std::vector<float> x = RandomVector(size_t(rows) * cols, cols, -3.0f, 3.0f);
    x[0] = 0.5f;  // Exact halves of a step round to even.
    QuantizedRows q;
    QuantizeRows(GetParam(), x.data(), rows, cols, &q);
    ASSERT_EQ(q.blocks_per_row, (cols + 31) / 32);
    for (int r = 0; r < rows; ++r) {
      for (int b = 0; b < q.blocks_per_row; ++b) {
        const int k0 = 32 * b, n = std::min(32, cols - k0);
        int8_t expected[32];
        float scale;
        ReferenceQuantizeBlock(&x[size_t(r) * cols + k0], n, expected, &scale);
        ASSERT_EQ(std::memcmp(&scale, &q.RowScales(r)[b], 4), 0) << "cols=" << cols;
        for (int i = 0; i < 32; ++i) {
          const int8_t got = q.RowQuants(r)[k0 + i];
          if (i >= n) {
            ASSERT_EQ(got, 0) << "padding";
            continue;
          }
          ASSERT_EQ(got, expected[i]) << "cols=" << cols << " r=" << r << " k=" << k0 + i;
          ASSERT_LE(std::abs(int(got)), 127);
          ASSERT_LE(std::fabs(x[size_t(r) * cols + k0 + i] - got * scale), scale * 0.5001f);
        }
      }
    }
  }
}

TEST_P(QuantizedMatMulTest, ZeroAndNonFiniteBlocks) {
  std::vector<float> x(64, 0.0f);
  x[40] = std::numeric_limits<float>::infinity();
  x[41] = 2.0f;
  QuantizedRows q;
  QuantizeRows(GetParam(), x.data(), 1, 64, &q);
  EXPECT_EQ(q.scales[0], 0.0f);
  EXPECT_TRUE(std::isnan(q.scales[1]));
  for (int8_t v : q.quants) EXPECT_EQ(v, 0);
  x[40] = std::numeric_limits<float>::quiet_NaN();
  QuantizeRows(GetParam(), x.data(), 1, 64, &q);
  EXPECT_TRUE(std::isnan(q.scales[1]));
  // A non-finite block makes the outputs NaN, as the float32 product would.
  const Q8Weight w = RandomQ8Weight(3, 64, 5);
  for (float v : RunQ8(GetParam(), x, 1, w)) EXPECT_TRUE(std::isnan(v));
}

// Bitwise the naive reference, on shapes with a short last block (688 = 21.5 blocks, the
// bundled target's down_proj width), odd column counts and every tile shape.
TEST_P(QuantizedMatMulTest, MatchesNaiveReferenceBitwise) {
  uint32_t seed = 7;
  for (int in_dim : {1, 5, 32, 40, 100, 259, 688}) {
    for (int out_dim : {1, 3, 9, 25}) {
      const Q8Weight w = RandomQ8Weight(out_dim, in_dim, seed++);
      for (int rows : {1, 2, 3, 4, 5, 7}) {
        const auto x = RandomVector(size_t(rows) * in_dim, seed++);
        const auto expected = ReferenceMatMul(x, rows, w);
        const auto got = RunQ8(GetParam(), x, rows, w);
        ASSERT_TRUE(BitwiseEqual(got.data(), expected.data(), got.size()))
            << "rows=" << rows << " in=" << in_dim << " out=" << out_dim;
      }
    }
  }
}

// Against the exact product with the dequantized weights (double): the error is the
// activation rounding, at most sum_b d_w(b) * d_x(b) / 2 * sum_k |q_w|, plus float32
// accumulation (1e-5 of sum |w x|).
TEST_P(QuantizedMatMulTest, CloseToExactProductOnDequantizedWeights) {
  const int rows = 5, in_dim = 688, out_dim = 40;
  const Q8Weight w = RandomQ8Weight(out_dim, in_dim, 3);
  const auto x = RandomVector(size_t(rows) * in_dim, 4, -2.0f, 2.0f);
  const auto got = RunQ8(GetParam(), x, rows, w);
  QuantizedRows q;
  QuantizeRows(GetParam(), x.data(), rows, in_dim, &q);
  double worst_share = 0;
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out_dim; ++o) {
      double exact = 0, magnitude = 0, bound = 0;
      for (int k = 0; k < in_dim; ++k) {
        const double wv = w.Value(o, k), xv = x[size_t(r) * in_dim + k];
        exact += wv * xv;
        magnitude += std::fabs(wv * xv);
        bound += std::fabs(wv) * q.RowScales(r)[k / 32] * 0.5;
      }
      bound += 1e-5 * magnitude;
      const double err = std::fabs(got[size_t(r) * out_dim + o] - exact);
      ASSERT_LE(err, bound) << "r=" << r << " o=" << o;
      worst_share = std::max(worst_share, err / magnitude);
    }
  }
  // Random signs make the rounding errors cancel: well under 1 % of sum |w x| here.
  EXPECT_LT(worst_share, 0.01);
}

// A column range writes exactly its columns, with the values of the full call.
TEST_P(QuantizedMatMulTest, ColumnRangesComposeToTheFullProduct) {
  const int rows = 6, in_dim = 259, out_dim = 37;
  const Q8Weight w = RandomQ8Weight(out_dim, in_dim, 8);
  const auto x = RandomVector(size_t(rows) * in_dim, 9);
  const auto full = RunQ8(GetParam(), x, rows, w);
  QuantizedRows q;
  QuantizeRows(GetParam(), x.data(), rows, in_dim, &q);
  std::vector<float> pieces(full.size(), -7.0f);
  for (int c = 0; c < out_dim; c += 5) {
    Q8MatMulRange(GetParam(), q, w.quants.data(), w.scales.data(), out_dim, c,
                  std::min(out_dim, c + 5), pieces.data());
  }
  EXPECT_TRUE(BitwiseEqual(pieces.data(), full.data(), full.size()));
}

INSTANTIATE_TEST_SUITE_P(Levels, QuantizedMatMulTest, ::testing::ValuesIn(AvailableSimdLevels()),
                         [](const auto& info) { return std::string(SimdLevelName(info.param)); });

// The AVX2 level gives bitwise the portable level's quants and products.
TEST(QuantizedMatMulLevelsTest, Avx2EqualsPortableBitwise) {
  if (!CpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (int in_dim : {40, 688, 2048}) {
    const int rows = 9, out_dim = 19;
    const Q8Weight w = RandomQ8Weight(out_dim, in_dim, in_dim);
    const auto x = RandomVector(size_t(rows) * in_dim, in_dim + 1, -4.0f, 4.0f);
    const auto avx2 = RunQ8(SimdLevel::kAvx2, x, rows, w);
    const auto portable = RunQ8(SimdLevel::kPortable, x, rows, w);
    EXPECT_TRUE(BitwiseEqual(avx2.data(), portable.data(), avx2.size())) << "in=" << in_dim;
  }
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
