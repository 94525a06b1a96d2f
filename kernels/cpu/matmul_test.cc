#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/quantized_tiles.h"
#include "kernels/cpu/reference.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/test_util.h"

namespace tandem {
namespace cpu {
namespace {

using testing::AllClose;
using testing::BitwiseEqual;
using testing::RandomVector;

class MatMulTest : public ::testing::TestWithParam<SimdLevel> {};

std::vector<float> RunMatMul(SimdLevel level, ThreadPool* pool, const std::vector<float>& x,
                             int rows, const std::vector<float>& w, int out_dim, int in_dim) {
  std::vector<float> out(size_t(rows) * out_dim, -7.0f);
  MatMul(level, pool, x.data(), rows, w.data(), out_dim, in_dim, out.data());
  return out;
}

TEST_P(MatMulTest, MatchesReferenceOnAwkwardShapes) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (int rows : {1, 2, 3, 4, 5, 7, 8, 13, 37}) {
    for (int in_dim : {1, 5, 8, 13, 20, 64, 100, 259}) {
      for (int out_dim : {1, 3, 7, 9, 25, 67}) {
        const auto x = RandomVector(size_t(rows) * in_dim, seed++);
        const auto w = RandomVector(size_t(out_dim) * in_dim, seed++);
        std::vector<float> expected(size_t(rows) * out_dim);
        reference::MatMul(x.data(), rows, w.data(), out_dim, in_dim, expected.data());
        EXPECT_TRUE(AllClose(RunMatMul(GetParam(), &pool, x, rows, w, out_dim, in_dim), expected,
                             1e-5f, 1e-6f * in_dim))
            << "rows=" << rows << " in=" << in_dim << " out=" << out_dim;
      }
    }
  }
}

TEST_P(MatMulTest, LargeShapesAcrossPanelsAndThreads) {
  ThreadPool pool(4);
  const int rows = 19, in_dim = 688, out_dim = 517;
  const auto x = RandomVector(size_t(rows) * in_dim, 11);
  const auto w = RandomVector(size_t(out_dim) * in_dim, 12);
  std::vector<float> expected(size_t(rows) * out_dim);
  reference::MatMul(x.data(), rows, w.data(), out_dim, in_dim, expected.data());
  EXPECT_TRUE(AllClose(RunMatMul(GetParam(), &pool, x, rows, w, out_dim, in_dim), expected, 1e-5f,
                       1e-6f * in_dim));
}

// Each output row is bitwise the same whether computed alone, inside calls of 2..37
// rows at any offset, or with 1, 2 or 4 threads.
TEST_P(MatMulTest, BatchInvariant) {
  for (const auto& [in_dim, out_dim] : std::vector<std::pair<int, int>>{{259, 1000}, {64, 67}}) {
    const int total = 37;
    const auto x = RandomVector(size_t(total) * in_dim, 21);
    const auto w = RandomVector(size_t(out_dim) * in_dim, 22);
    std::vector<float> alone(size_t(total) * out_dim);
    for (int r = 0; r < total; ++r) {
      MatMul(GetParam(), nullptr, x.data() + size_t(r) * in_dim, 1, w.data(), out_dim, in_dim,
             alone.data() + size_t(r) * out_dim);
    }
    for (int threads : {1, 2, 4}) {
      ThreadPool pool(threads);
      for (int rows = 2; rows <= total; ++rows) {
        const int begin = (rows * 7) % (total - rows + 1);
        std::vector<float> out(size_t(rows) * out_dim);
        MatMul(GetParam(), &pool, x.data() + size_t(begin) * in_dim, rows, w.data(), out_dim,
               in_dim, out.data());
        ASSERT_TRUE(BitwiseEqual(out.data(), alone.data() + size_t(begin) * out_dim, out.size()))
            << "threads=" << threads << " rows=" << rows << " begin=" << begin << " in=" << in_dim
            << " out=" << out_dim;
      }
    }
  }
}

TEST_P(MatMulTest, EmptyShapesWriteNothing) {
  std::vector<float> out(4, 3.0f);
  const std::vector<float> x(8, 1.0f), w(8, 1.0f);
  MatMul(GetParam(), nullptr, x.data(), 0, w.data(), 2, 4, out.data());
  MatMul(GetParam(), nullptr, x.data(), 2, w.data(), 0, 4, out.data());
  for (float v : out) EXPECT_EQ(v, 3.0f);
  // in_dim = 0 gives zeros.
  MatMul(GetParam(), nullptr, x.data(), 2, w.data(), 2, 0, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

// A weight in one stored format plus its float32 widening computed here, independently
// of the kernel's readers (bf16/f16 by half.h, q8_0 and q4_0 as float(q) * float(scale),
// q4_0 packed here by the layout of kernels/backend.h).
struct StoredWeight {
  DType dtype;
  int out_dim, in_dim;
  std::vector<uint16_t> half;   // bf16/f16 elements, or q8_0/q4_0 scales.
  std::vector<int8_t> quants;   // q8_0 and q4_0 ([out_dim, in_dim], one per value).
  std::vector<uint8_t> packed;  // q4_0 only.
  std::vector<uint8_t> tiles;   // q8_0 and q4_0: the kernel's layout (PackQuantizedTiles).
  std::vector<float> widened;   // [out_dim, in_dim]
  WeightMatrix matrix() const {
    return {dtype, IsBlockQuantized(dtype) ? tiles.data() : static_cast<const void*>(half.data()),
            out_dim, in_dim};
  }
};

// q4_0 nibbles: in a block of n values, value i < h = ceil(n / 2) low in byte i, h + i high.
std::vector<uint8_t> PackQ4(const std::vector<int8_t>& quants, int out_dim, int in_dim) {
  const int row_bytes = (in_dim + 1) / 2;
  std::vector<uint8_t> packed(size_t(out_dim) * row_bytes, 0);
  for (int o = 0; o < out_dim; ++o) {
    for (int k = 0; k < in_dim; ++k) {
      const int k0 = k / 32 * 32, half = (std::min(32, in_dim - k0) + 1) / 2, i = k - k0;
      const int nibble = quants[size_t(o) * in_dim + k] + 8;
      packed[size_t(o) * row_bytes + k0 / 2 + (i < half ? i : i - half)] |=
          uint8_t(i < half ? nibble : nibble << 4);
    }
  }
  return packed;
}

StoredWeight MakeStoredWeight(DType dtype, int out_dim, int in_dim, uint32_t seed) {
  StoredWeight w{dtype, out_dim, in_dim, {}, {}, {}, {}, {}};
  const std::vector<float> values = RandomVector(size_t(out_dim) * in_dim, seed);
  w.widened.resize(values.size());
  if (!IsBlockQuantized(dtype)) {
    w.half.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      w.half[i] = dtype == DType::kBF16 ? FloatToBf16(values[i]) : FloatToF16(values[i]);
      w.widened[i] = dtype == DType::kBF16 ? Bf16ToFloat(w.half[i]) : F16ToFloat(w.half[i]);
    }
    return w;
  }
  const int64_t blocks = Q8BlocksPerRow(in_dim);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> quant(dtype == DType::kQ8_0 ? -127 : -8,
                                           dtype == DType::kQ8_0 ? 127 : 7);
  const std::vector<float> scales = RandomVector(size_t(out_dim) * blocks, seed + 1, 1e-3f, 0.05f);
  for (float scale : scales) w.half.push_back(FloatToF16(scale));
  for (size_t i = 0; i < values.size(); ++i) {
    w.quants.push_back(static_cast<int8_t>(quant(rng)));
    const size_t o = i / in_dim, k = i % in_dim;
    w.widened[i] = float(w.quants[i]) * F16ToFloat(w.half[o * blocks + k / kQ8BlockSize]);
  }
  if (dtype == DType::kQ4_0) w.packed = PackQ4(w.quants, out_dim, in_dim);
  w.tiles.resize(QuantizedTilesBytes(dtype, out_dim, in_dim));
  PackQuantizedTiles(dtype, dtype == DType::kQ4_0 ? w.packed.data() : (const void*)w.quants.data(),
                     w.half.data(), out_dim, in_dim, w.tiles.data());
  return w;
}

// 16-bit weights give bitwise the float32 MatMul on their widened copy (same
// accumulation order), on shapes with k tails, for every row count and thread count.
TEST_P(MatMulTest, SixteenBitFormatsEqualFloat32OnWidenedWeightsBitwise) {
  uint32_t seed = 100;
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (int in_dim : {5, 8, 32, 40, 100, 259}) {
      for (int out_dim : {1, 7, 25, 67}) {
        const StoredWeight w = MakeStoredWeight(dtype, out_dim, in_dim, seed++);
        for (int rows : {1, 2, 3, 4, 5, 9}) {
          const auto x = RandomVector(size_t(rows) * in_dim, seed++);
          const auto expected = RunMatMul(GetParam(), nullptr, x, rows, w.widened, out_dim, in_dim);
          for (int threads : {1, 2}) {
            ThreadPool pool(threads);
            std::vector<float> out(size_t(rows) * out_dim, -7.0f);
            MatMul(GetParam(), &pool, x.data(), rows, w.matrix(), out.data());
            ASSERT_TRUE(BitwiseEqual(out.data(), expected.data(), out.size()))
                << DTypeName(dtype) << " rows=" << rows << " in=" << in_dim << " out=" << out_dim;
          }
        }
      }
    }
  }
}

// q8_0 and q4_0 go through the integer kernel (activations quantized per 32-block):
// within its stated tolerance of the float32 MatMul on the dequantized weights,
// |error| <= sum_k |w[o, k]| * max|x in k's block| / 254 + 1e-5 * sum_k |w[o, k] x[k]|.
TEST_P(MatMulTest, BlockFormatsWithinToleranceOfFloat32OnDequantizedWeights) {
  uint32_t seed = 200;
  for (const auto& [dtype, in_dim] : std::vector<std::pair<DType, int>>{{DType::kQ8_0, 5},
                                                                        {DType::kQ8_0, 40},
                                                                        {DType::kQ8_0, 259},
                                                                        {DType::kQ8_0, 688},
                                                                        {DType::kQ4_0, 5},
                                                                        {DType::kQ4_0, 259},
                                                                        {DType::kQ4_0, 688}}) {
    const int out_dim = 25, rows = 5;
    const StoredWeight w = MakeStoredWeight(dtype, out_dim, in_dim, seed++);
    const auto x = RandomVector(size_t(rows) * in_dim, seed++);
    const auto expected = RunMatMul(GetParam(), nullptr, x, rows, w.widened, out_dim, in_dim);
    ThreadPool pool(2);
    std::vector<float> out(size_t(rows) * out_dim, -7.0f);
    MatMul(GetParam(), &pool, x.data(), rows, w.matrix(), out.data());
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < out_dim; ++o) {
        double bound = 0;
        for (int k = 0; k < in_dim; ++k) {
          float block_max = 0;
          for (int i = k / 32 * 32; i < std::min(in_dim, k / 32 * 32 + 32); ++i) {
            block_max = std::max(block_max, std::fabs(x[size_t(r) * in_dim + i]));
          }
          const double wx = std::fabs(w.widened[size_t(o) * in_dim + k]);
          bound += wx * block_max / 254.0 + 1e-5 * wx * std::fabs(x[size_t(r) * in_dim + k]);
        }
        const size_t i = size_t(r) * out_dim + o;
        ASSERT_LE(std::fabs(out[i] - expected[i]), bound)
            << DTypeName(dtype) << " in=" << in_dim << " r=" << r;
      }
    }
    std::vector<float> row(in_dim);
    WidenRow(w.matrix(), out_dim - 1, row.data());
    EXPECT_TRUE(BitwiseEqual(row.data(), &w.widened[size_t(out_dim - 1) * in_dim], in_dim));
  }
}

// Stored formats stay batch invariant: a row alone equals the same row in any batch,
// at any thread count (q8_0 and q4_0 with a short last block: 296 = 9.25 blocks).
TEST_P(MatMulTest, StoredFormatsBatchInvariant) {
  const int in_dim = 296, out_dim = 203, total = 13;
  const auto x = RandomVector(size_t(total) * in_dim, 31);
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
    const StoredWeight w = MakeStoredWeight(dtype, out_dim, in_dim, 32);
    std::vector<float> alone(size_t(total) * out_dim);
    for (int r = 0; r < total; ++r) {
      MatMul(GetParam(), nullptr, x.data() + size_t(r) * in_dim, 1, w.matrix(),
             alone.data() + size_t(r) * out_dim);
    }
    for (int threads : {1, 2, 4}) {
      ThreadPool pool(threads);
      for (int rows = 2; rows <= total; ++rows) {
        const int begin = total - rows;
        std::vector<float> out(size_t(rows) * out_dim);
        MatMul(GetParam(), &pool, x.data() + size_t(begin) * in_dim, rows, w.matrix(), out.data());
        ASSERT_TRUE(BitwiseEqual(out.data(), alone.data() + size_t(begin) * out_dim, out.size()))
            << DTypeName(dtype) << " rows=" << rows << " threads=" << threads;
      }
    }
  }
}

// Every tile height (one sweep: 1-6 rows on AVX2, 1-8 on AVX-512; more rows: panels of
// 4-row blocks, AVX-512 8-row blocks of paired 512-bit tiles, and a sweep of the rest
// rows) gives each row bitwise its
// one-row result, for every format, with whole cache-line steps, a partial step and a
// masked k tail (in_dim 61 = 32 + 3 x 8 + 5; 300: for q8_0/q4_0 a short last block of 29
// and 12 values), k in panel blocks of 1024 with carried accumulators (in_dim 1061: a
// second block of 37 values; 2048: two whole blocks, x copied to padded rows), tail
// tiles of every width and next-tile prefetches at the matrix end (out_dim 1, 19, 67), at
// 1 and 2 threads; and (f32, bf16, f16) within tolerance of the naive reference.
TEST_P(MatMulTest, EveryRowCountMatchesOneRowCallsBitwise) {
  uint32_t seed = 300;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
    for (int in_dim : {61, 300, 1061, 2048}) {
      for (int out_dim : {1, 19, 67}) {
        if (in_dim > 1024 && (IsBlockQuantized(dtype) || out_dim == 1)) continue;
        const StoredWeight w = MakeStoredWeight(dtype, out_dim, in_dim, seed++);
        const WeightMatrix matrix = dtype == DType::kF32
                                        ? WeightMatrix{dtype, w.widened.data(), out_dim, in_dim}
                                        : w.matrix();
        const int total = in_dim > 1024 ? 21 : 13;
        const auto x = RandomVector(size_t(total) * in_dim, seed++);
        std::vector<float> alone(size_t(total) * out_dim), expected(alone.size());
        reference::MatMul(x.data(), total, w.widened.data(), out_dim, in_dim, expected.data());
        for (int r = 0; r < total; ++r) {
          MatMul(GetParam(), nullptr, x.data() + size_t(r) * in_dim, 1, matrix,
                 alone.data() + size_t(r) * out_dim);
        }
        if (!IsBlockQuantized(dtype)) {  // Block formats: the tolerance test above.
          ASSERT_TRUE(AllClose(alone, expected, 1e-5f, 1e-6f * in_dim)) << DTypeName(dtype);
        }
        for (int threads : {1, 2}) {
          ThreadPool pool(threads);
          for (int rows = 1; rows <= total; ++rows) {
            std::vector<float> out(size_t(rows) * out_dim, -7.0f);
            MatMul(GetParam(), &pool, x.data(), rows, matrix, out.data());
            ASSERT_TRUE(BitwiseEqual(out.data(), alone.data(), out.size()))
                << DTypeName(dtype) << " rows=" << rows << " in=" << in_dim << " out=" << out_dim
                << " threads=" << threads;
          }
        }
      }
    }
  }
}

// The AVX-512 level's float tiles (32 registers, larger tiles; paired 512-bit tiles in
// 8-row blocks, with and without a rest of 1-7 rows) give bitwise the AVX2 level's
// results: the same operations per element.
TEST(MatMulLevelsTest, FloatFormatsEqualAcrossAvx2AndAvx512Bitwise) {
  if (!CpuHasAvx512Vnni()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI level";
  uint32_t seed = 400;
  ThreadPool pool(2);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const auto& [in_dim, out_dim] :
         std::vector<std::pair<int, int>>{{61, 67}, {300, 19}, {1061, 53}, {2048, 30}}) {
      const StoredWeight w = MakeStoredWeight(dtype, out_dim, in_dim, seed++);
      const WeightMatrix matrix = dtype == DType::kF32
                                      ? WeightMatrix{dtype, w.widened.data(), out_dim, in_dim}
                                      : w.matrix();
      for (int rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 24, 27}) {
        const auto x = RandomVector(size_t(rows) * in_dim, seed++);
        std::vector<float> avx2(size_t(rows) * out_dim), avx512(avx2.size());
        MatMul(SimdLevel::kAvx2, &pool, x.data(), rows, matrix, avx2.data());
        MatMul(SimdLevel::kAvx512Vnni, &pool, x.data(), rows, matrix, avx512.data());
        ASSERT_TRUE(BitwiseEqual(avx2.data(), avx512.data(), avx2.size()))
            << DTypeName(dtype) << " rows=" << rows << " in=" << in_dim << " out=" << out_dim;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, MatMulTest, ::testing::ValuesIn(AvailableSimdLevels()),
                         [](const auto& info) { return std::string(SimdLevelName(info.param)); });

}  // namespace
}  // namespace cpu
}  // namespace tandem
