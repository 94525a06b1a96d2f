#include "model/weight_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/float16.h"

namespace tandem {
namespace {

TEST(WeightFormatTest, ParseWeightFormat) {
  EXPECT_EQ(*ParseWeightFormat("bf16"), DType::kBF16);
  EXPECT_EQ(*ParseWeightFormat("q8_0"), DType::kQ8_0);
  EXPECT_EQ(*ParseWeightFormat("q4_0"), DType::kQ4_0);
  auto bad = ParseWeightFormat("q4");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("f32, f16, bf16, q8_0 or q4_0"));
}

// Every linear matrix of the bundled draft converted to each format holds the original
// value rounded to that format (q8_0, q4_0: within half a step of its block); the embedding
// is shared, and WeightBytes shrinks with the format.
TEST(WeightFormatTest, ConvertsEveryLinearMatrix) {
  auto weights = LoadLlamaWeights("models/draft", 0, 1);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const int64_t f32_bytes = WeightBytes(*weights);
  int64_t q8_bytes = 0;
  for (DType format : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    auto converted = ConvertLinearWeights(*weights, format);
    ASSERT_TRUE(converted.ok()) << converted.status();
    EXPECT_EQ(converted->embed_tokens.data, weights->embed_tokens.data);
    const HostTensor& a = weights->layers[1].down_proj;  // 344 columns: a partial q8_0 block.
    const HostTensor& b = converted->layers[1].down_proj;
    ASSERT_EQ(b.dtype, format);
    EXPECT_NE(b.data, a.data);
    for (int64_t i = 0; i < a.rows; ++i) {
      for (int64_t j = 0; j < a.cols; ++j) {
        const float v = a.At(i, j);
        switch (format) {
          case DType::kF32:
            ASSERT_EQ(b.At(i, j), v);
            break;
          case DType::kF16:
            ASSERT_EQ(b.At(i, j), HalfToFloat(FloatToHalf(v)));
            break;
          case DType::kBF16:
            ASSERT_EQ(b.At(i, j), BFloat16ToFloat(FloatToBFloat16(v)));
            break;
          case DType::kQ8_0:
          case DType::kQ4_0: {
            float max_abs = 0;
            for (int64_t k = j / 32 * 32; k < std::min<int64_t>(a.cols, j / 32 * 32 + 32); ++k) {
              max_abs = std::max(max_abs, std::fabs(a.At(i, k)));
            }
            const float steps = format == DType::kQ8_0 ? 127.0f : 7.0f;
            ASSERT_LE(std::fabs(b.At(i, j) - v), max_abs / steps / 2 * 1.002f);
            break;
          }
        }
      }
    }
    const int64_t bytes = WeightBytes(*converted);
    if (format == DType::kF32) {
      EXPECT_EQ(bytes, f32_bytes);
    } else if (format == DType::kBF16) {
      EXPECT_LT(bytes, f32_bytes * 0.7);
    } else if (format == DType::kQ8_0) {
      EXPECT_LT(bytes, f32_bytes * 0.55);
      q8_bytes = bytes;
    } else if (format == DType::kQ4_0) {
      EXPECT_LT(bytes, q8_bytes);
    }
  }
}

}  // namespace
}  // namespace tandem
