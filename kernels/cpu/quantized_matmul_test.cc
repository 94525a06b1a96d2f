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
  float inverse = m == 0.0f ? 0.0f : 1.0f / *scale;
  if (std::isinf(inverse)) *scale = inverse = 0.0f;  // Too small to invert: a zero block.
  for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] * inverse));
}

// A random q8_0 or q4_0 weight; Quant(o, k) decodes the stored layout of
// kernels/backend.h directly (q4_0: value i < h = ceil(n / 2) of a block of n values is
// the low nibble of its byte i, value h + i the high nibble, minus 8).
struct BlockWeight {
  DType dtype;
  int out_dim, in_dim, blocks;
  std::vector<int8_t> quants;    // q8_0: [out_dim, in_dim]
  std::vector<uint8_t> packed;   // q4_0: [out_dim, (in_dim + 1) / 2]
  std::vector<uint16_t> scales;  // f16 [out_dim, blocks]
  int Quant(int o, int k) const {
    if (dtype == DType::kQ8_0) return quants[size_t(o) * in_dim + k];
    const int k0 = k / 32 * 32, half = (std::min(32, in_dim - k0) + 1) / 2, i = k - k0;
    const uint8_t byte =
        packed[size_t(o) * ((in_dim + 1) / 2) + k0 / 2 + (i < half ? i : i - half)];
    return (i < half ? byte & 15 : byte >> 4) - 8;
  }
  float Value(int o, int k) const {
    return float(Quant(o, k)) * F16ToFloat(scales[size_t(o) * blocks + k / 32]);
  }
};

BlockWeight RandomWeight(DType dtype, int out_dim, int in_dim, uint32_t seed) {
  BlockWeight w{dtype, out_dim, in_dim, (in_dim + 31) / 32, {}, {}, {}};
  std::mt19937 rng(seed);
  if (dtype == DType::kQ8_0) {
    std::uniform_int_distribution<int> quant(-127, 127);
    for (int64_t i = 0; i < int64_t(out_dim) * in_dim; ++i) w.quants.push_back(int8_t(quant(rng)));
  } else {
    std::uniform_int_distribution<int> byte(0, 255);  // Nibbles 0..15: quants -8..7.
    for (int64_t i = 0; i < int64_t(out_dim) * ((in_dim + 1) / 2); ++i) {
      w.packed.push_back(uint8_t(byte(rng)));
    }
  }
  for (float s : RandomVector(size_t(out_dim) * w.blocks, seed + 1, 1e-3f, 0.05f)) {
    w.scales.push_back(FloatToF16(s));
  }
  return w;
}

// out[r, o] by the documented order: per block, the exact int32 sum s of the products;
// acc = fma(float(s), d_w * d_x, acc) block after block; out = acc.
std::vector<float> ReferenceMatMul(const std::vector<float>& x, int rows, const BlockWeight& w) {
  std::vector<float> out(size_t(rows) * w.out_dim);
  std::vector<int8_t> xq(32);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < w.out_dim; ++o) {
      float acc = 0.0f;
      for (int b = 0; b < w.blocks; ++b) {
        const int k0 = 32 * b, n = std::min(32, w.in_dim - k0);
        float dx;
        ReferenceQuantizeBlock(&x[size_t(r) * w.in_dim + k0], n, xq.data(), &dx);
        const float d = F16ToFloat(w.scales[size_t(o) * w.blocks + b]) * dx;
        int sum = 0;
        for (int i = 0; i < n; ++i) sum += w.Quant(o, k0 + i) * int(xq[i]);
        acc = std::fma(float(sum), d, acc);
      }
      out[size_t(r) * w.out_dim + o] = acc;
    }
  }
  return out;
}

// The product over columns [col_begin, col_end) into `out`, through the tiled layout
// (PackQuantizedTiles of w's file layout).
std::vector<float> RunRange(SimdLevel level, const QuantizedRows& x, const BlockWeight& w,
                            int col_begin, int col_end, std::vector<float>* out) {
  std::vector<uint8_t> tiles(QuantizedTilesBytes(w.dtype, w.out_dim, w.in_dim));
  const void* quants = w.dtype == DType::kQ8_0 ? static_cast<const void*>(w.quants.data())
                                               : static_cast<const void*>(w.packed.data());
  const QuantizedTiles view =
      PackQuantizedTiles(w.dtype, quants, w.scales.data(), w.out_dim, w.in_dim, tiles.data());
  QuantizedMatMulRange(level, x, view, col_begin, col_end, out->data());
  return *out;
}

std::vector<float> RunMatMul(SimdLevel level, const std::vector<float>& x, int rows,
                             const BlockWeight& w) {
  QuantizedRows quantized;
  QuantizeRows(level, x.data(), rows, w.in_dim, &quantized);
  std::vector<float> out(size_t(rows) * w.out_dim, -7.0f);
  return RunRange(level, quantized, w, 0, w.out_dim, &out);
}

constexpr DType kFormats[] = {DType::kQ8_0, DType::kQ4_0};

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
  // Values so small that 1 / d overflows: a zero block, not infinities.
  std::vector<float> tiny(32, 1e-40f);
  QuantizedRows t;
  QuantizeRows(GetParam(), tiny.data(), 1, 32, &t);
  EXPECT_EQ(t.scales[0], 0.0f);
  for (int8_t v : t.quants) EXPECT_EQ(v, 0);
  x[40] = std::numeric_limits<float>::quiet_NaN();
  QuantizeRows(GetParam(), x.data(), 1, 64, &q);
  EXPECT_TRUE(std::isnan(q.scales[1]));
  // A non-finite block makes the outputs NaN, as the float32 product would.
  for (DType dtype : kFormats) {
    for (float v : RunMatMul(GetParam(), x, 1, RandomWeight(dtype, 3, 64, 5))) {
      EXPECT_TRUE(std::isnan(v));
    }
  }
}

// Bitwise the naive reference, on shapes with a short last block (688 = 21.5 blocks, the
// bundled target's down_proj width), odd column counts and every tile shape, for q8_0
// and q4_0 (its short blocks of odd length too).
TEST_P(QuantizedMatMulTest, MatchesNaiveReferenceBitwise) {
  uint32_t seed = 7;
  for (DType dtype : kFormats) {
    for (int in_dim : {1, 5, 32, 40, 100, 259, 688}) {
      for (int out_dim : {1, 3, 9, 25}) {
        const BlockWeight w = RandomWeight(dtype, out_dim, in_dim, seed++);
        for (int rows : {1, 2, 3, 4, 5, 7}) {
          const auto x = RandomVector(size_t(rows) * in_dim, seed++);
          const auto expected = ReferenceMatMul(x, rows, w);
          const auto got = RunMatMul(GetParam(), x, rows, w);
          ASSERT_TRUE(BitwiseEqual(got.data(), expected.data(), got.size()))
              << DTypeName(dtype) << " rows=" << rows << " in=" << in_dim << " out=" << out_dim;
        }
      }
    }
  }
}

// Against the exact product with the dequantized weights (double): the error is the
// activation rounding, at most sum_b d_w(b) * d_x(b) / 2 * sum_k |q_w|, plus float32
// accumulation (1e-5 of sum |w x|).
TEST_P(QuantizedMatMulTest, CloseToExactProductOnDequantizedWeights) {
  const int rows = 5, in_dim = 688, out_dim = 40;
  for (DType dtype : kFormats) {
    const BlockWeight w = RandomWeight(dtype, out_dim, in_dim, 3);
    const auto x = RandomVector(size_t(rows) * in_dim, 4, -2.0f, 2.0f);
    const auto got = RunMatMul(GetParam(), x, rows, w);
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
        ASSERT_LE(err, bound) << DTypeName(dtype) << " r=" << r << " o=" << o;
        worst_share = std::max(worst_share, err / magnitude);
      }
    }
    // Random signs make the rounding errors cancel: well under 1 % of sum |w x| here.
    EXPECT_LT(worst_share, 0.01) << DTypeName(dtype);
  }
}

// A column range writes exactly its columns (tile-aligned or not), with the values of
// the full call.
TEST_P(QuantizedMatMulTest, ColumnRangesComposeToTheFullProduct) {
  const int rows = 6, in_dim = 259, out_dim = 37;
  for (DType dtype : kFormats) {
    const BlockWeight w = RandomWeight(dtype, out_dim, in_dim, 8);
    const auto x = RandomVector(size_t(rows) * in_dim, 9);
    const auto full = RunMatMul(GetParam(), x, rows, w);
    QuantizedRows q;
    QuantizeRows(GetParam(), x.data(), rows, in_dim, &q);
    std::vector<float> pieces(full.size(), -7.0f);
    for (int c = 0; c < out_dim; c += 5) {
      const int end = std::min(out_dim, c + 5);
      RunRange(GetParam(), q, w, c, end, &pieces);
      for (int r = 0; r < rows; ++r) {
        for (int o = end; o < out_dim; ++o) {
          ASSERT_EQ(pieces[size_t(r) * out_dim + o], -7.0f) << "wrote column " << o;
        }
      }
    }
    EXPECT_TRUE(BitwiseEqual(pieces.data(), full.data(), full.size())) << DTypeName(dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, QuantizedMatMulTest, ::testing::ValuesIn(AvailableSimdLevels()),
                         [](const auto& info) { return std::string(SimdLevelName(info.param)); });

// The AVX2 level gives bitwise the portable level's products (q8_0 and q4_0).
TEST(QuantizedMatMulLevelsTest, Avx2EqualsPortableBitwise) {
  if (!CpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (DType dtype : kFormats) {
    for (int in_dim : {40, 688, 2048, 2049}) {
      const int rows = 9, out_dim = 19;
      const BlockWeight w = RandomWeight(dtype, out_dim, in_dim, in_dim);
      const auto x = RandomVector(size_t(rows) * in_dim, in_dim + 1, -4.0f, 4.0f);
      const auto avx2 = RunMatMul(SimdLevel::kAvx2, x, rows, w);
      const auto portable = RunMatMul(SimdLevel::kPortable, x, rows, w);
      EXPECT_TRUE(BitwiseEqual(avx2.data(), portable.data(), avx2.size()))
          << DTypeName(dtype) << " in=" << in_dim;
    }
  }
}

// The AVX-512 VNNI level (vpdpbusd: unsigned weights + bias, the bias times the block
// sums of x subtracted in int32) gives bitwise the AVX2 level's products: same int32
// block sums, same float order. 1-13 rows (row pairs and a last single row), odd and
// short-block widths, column sub-ranges that cut tiles. Skipped on a CPU without
// AVX-512 VNNI.
TEST(QuantizedMatMulLevelsTest, Avx512VnniEqualsAvx2Bitwise) {
  if (!CpuHasAvx512Vnni()) GTEST_SKIP() << "no AVX-512 VNNI+VL+BW on this CPU";
  uint32_t seed = 40;
  for (DType dtype : kFormats) {
    for (int in_dim : {5, 61, 296, 2048, 2049}) {
      const int out_dim = 37;
      const BlockWeight w = RandomWeight(dtype, out_dim, in_dim, seed++);
      const auto x = RandomVector(size_t(13) * in_dim, seed++, -4.0f, 4.0f);
      for (int rows = 1; rows <= 13; ++rows) {
        QuantizedRows q;
        QuantizeRows(SimdLevel::kAvx512Vnni, x.data(), rows, in_dim, &q);
        std::vector<float> vnni(size_t(rows) * out_dim, -7.0f), avx2(vnni);
        for (int c = 0; c < out_dim; c += 9) {  // Ranges 9 wide: 4 of them cut tiles.
          RunRange(SimdLevel::kAvx512Vnni, q, w, c, std::min(out_dim, c + 9), &vnni);
        }
        RunRange(SimdLevel::kAvx2, q, w, 0, out_dim, &avx2);
        ASSERT_TRUE(BitwiseEqual(vnni.data(), avx2.data(), vnni.size()))
            << DTypeName(dtype) << " rows=" << rows << " in=" << in_dim;
      }
    }
  }
}

// Extreme quants: |x| = 127 and weights at the ends of their ranges (q8_0 -127 and 127,
// q4_0 nibbles 0 and 15), where the bias trick's int32 sums are largest; every level
// equals the reference bitwise.
TEST(QuantizedMatMulLevelsTest, ExtremeQuantsExactOnEveryLevel) {
  const int in_dim = 64, out_dim = 4, rows = 2;
  std::vector<float> x(size_t(rows) * in_dim);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 3 == 0) ? -1.0f : 1.0f;
  for (DType dtype : kFormats) {
    BlockWeight w = RandomWeight(dtype, out_dim, in_dim, 11);
    for (auto& q : w.quants) q = q < 0 ? -127 : 127;
    for (auto& p : w.packed) p = (p & 1) ? 0xf0 : 0x0f;
    const auto expected = ReferenceMatMul(x, rows, w);
    for (SimdLevel level : AvailableSimdLevels()) {
      const auto got = RunMatMul(level, x, rows, w);
      EXPECT_TRUE(BitwiseEqual(got.data(), expected.data(), got.size()))
          << DTypeName(dtype) << " " << SimdLevelName(level);
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
