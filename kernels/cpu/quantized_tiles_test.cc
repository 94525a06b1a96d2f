#include "kernels/cpu/quantized_tiles.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/half.h"

namespace tandem {
namespace cpu {
namespace {

// A random q8_0 or q4_0 matrix in the file layout of kernels/backend.h, with its quants
// kept as plain ints for the checks (q4_0 packed here from them).
struct FileWeight {
  DType dtype;
  int out_dim, in_dim;
  std::vector<int> values;       // [out_dim, in_dim]
  std::vector<uint8_t> stored;   // q8_0 int8 [out_dim, in_dim]; q4_0 [out_dim, ceil(in / 2)]
  std::vector<uint16_t> scales;  // f16 [out_dim, blocks]
};

FileWeight MakeFileWeight(DType dtype, int out_dim, int in_dim, uint32_t seed) {
  FileWeight w{dtype, out_dim, in_dim, {}, {}, {}};
  std::mt19937 rng(seed);
  const bool q4 = dtype == DType::kQ4_0;
  std::uniform_int_distribution<int> quant(q4 ? -8 : -127, q4 ? 7 : 127);
  for (int i = 0; i < out_dim * in_dim; ++i) w.values.push_back(quant(rng));
  const int blocks = static_cast<int>(Q8BlocksPerRow(in_dim));
  std::uniform_real_distribution<float> scale(1e-3f, 0.05f);
  for (int i = 0; i < out_dim * blocks; ++i) w.scales.push_back(FloatToF16(scale(rng)));
  if (!q4) {
    for (int v : w.values) w.stored.push_back(static_cast<uint8_t>(int8_t(v)));
    return w;
  }
  const int64_t row_bytes = Q4BytesPerRow(in_dim);
  w.stored.assign(size_t(out_dim) * row_bytes, 0);
  for (int o = 0; o < out_dim; ++o) {
    for (int k = 0; k < in_dim; ++k) {  // Value i < h = ceil(n / 2) low in byte i, h + i high.
      const int k0 = k / 32 * 32, h = (std::min(32, in_dim - k0) + 1) / 2, i = k - k0;
      const int nibble = w.values[size_t(o) * in_dim + k] + 8;
      w.stored[o * row_bytes + k0 / 2 + (i < h ? i : i - h)] |=
          static_cast<uint8_t>(i < h ? nibble : nibble << 4);
    }
  }
  return w;
}

QuantizedTiles Pack(const FileWeight& w, std::vector<uint8_t>* buffer) {
  buffer->assign(QuantizedTilesBytes(w.dtype, w.out_dim, w.in_dim), 0xab);
  return PackQuantizedTiles(w.dtype, w.stored.data(), w.scales.data(), w.out_dim, w.in_dim,
                            buffer->data());
}

constexpr DType kFormats[] = {DType::kQ8_0, DType::kQ4_0};

// Every quant, scale and value of the file comes back; padding (k past in_dim, columns
// past out_dim) reads as quant 0 and padded columns as scale 0. Shapes with partial
// tiles, short last blocks and odd q4_0 block lengths.
TEST(QuantizedTilesTest, RoundTripsEveryValueAndPadsWithZeros) {
  uint32_t seed = 1;
  for (DType dtype : kFormats) {
    for (int out_dim : {1, 15, 16, 17, 40}) {
      for (int in_dim : {1, 5, 31, 32, 33, 64, 100, 259}) {
        const FileWeight w = MakeFileWeight(dtype, out_dim, in_dim, seed++);
        std::vector<uint8_t> buffer;
        const QuantizedTiles tiles = Pack(w, &buffer);
        const int blocks = tiles.blocks();
        for (int o = 0; o < tiles.tiles() * kTileColumns; ++o) {
          for (int k = 0; k < blocks * kQ8BlockSize; ++k) {
            const bool inside = o < out_dim && k < in_dim;
            ASSERT_EQ(tiles.Quant(o, k), inside ? w.values[size_t(o) * in_dim + k] : 0)
                << DTypeName(dtype) << " out=" << out_dim << " in=" << in_dim << " o=" << o
                << " k=" << k;
            if (!inside) continue;
            const float scale = F16ToFloat(w.scales[size_t(o) * blocks + k / kQ8BlockSize]);
            ASSERT_EQ(tiles.Value(o, k), float(w.values[size_t(o) * in_dim + k]) * scale);
          }
          if (o < out_dim) continue;
          for (int b = 0; b < blocks; ++b) {
            ASSERT_EQ(tiles.Scale(o, b), 0.0f) << "padded column " << o;
          }
        }
      }
    }
  }
}

// The documented byte positions, read directly: in tile t (3 blocks here), line u of
// block b starts at (u * 3 + b) * 64, and its byte 4 c + i is column 16 t + c at
// k = 32 b + 4 u + i (q4_0: low nibble; k + 16 the high nibble); the scales follow the
// lines, 32 bytes per block.
TEST(QuantizedTilesTest, BytesSitWhereTheLayoutSays) {
  for (DType dtype : kFormats) {
    const int out_dim = 40, in_dim = 96;
    const FileWeight w = MakeFileWeight(dtype, out_dim, in_dim, 9);
    std::vector<uint8_t> buffer;
    const QuantizedTiles tiles = Pack(w, &buffer);
    const bool q4 = dtype == DType::kQ4_0;
    const size_t lines = q4 ? 4 : 8, tile_bytes = 3 * (lines * 64 + 32);
    ASSERT_EQ(tiles.TileBytes(), tile_bytes);
    ASSERT_EQ(buffer.size(), 3 * tile_bytes);
    for (int o = 0; o < out_dim; ++o) {
      const int t = o / 16, c = o % 16;
      for (int k = 0; k < in_dim; ++k) {
        const int b = k / 32, p = k % 32, u = (q4 ? p % 16 : p) / 4, i = p % 4;
        const uint8_t byte = buffer[t * tile_bytes + (u * 3 + b) * 64 + 4 * c + i];
        const int value = q4 ? ((p < 16 ? byte & 15 : byte >> 4) - 8) : int(int8_t(byte));
        ASSERT_EQ(value, w.values[size_t(o) * in_dim + k]) << DTypeName(dtype) << " o=" << o;
      }
      for (int b = 0; b < 3; ++b) {
        uint16_t scale;
        std::memcpy(&scale, &buffer[t * tile_bytes + lines * 3 * 64 + 32 * b + 2 * c], 2);
        ASSERT_EQ(scale, w.scales[size_t(o) * 3 + b]);
      }
    }
  }
}

// Whole tiles and blocks take exactly the file's bytes (quants plus scales); partial ones
// round up to them.
TEST(QuantizedTilesTest, SizeIsTheFileSizeForWholeTilesAndBlocks) {
  EXPECT_EQ(QuantizedTilesBytes(DType::kQ8_0, 32, 64), 32u * 64 + 32 * 2 * 2);
  EXPECT_EQ(QuantizedTilesBytes(DType::kQ4_0, 32, 64), 32u * 32 + 32 * 2 * 2);
  EXPECT_EQ(QuantizedTilesBytes(DType::kQ8_0, 17, 33), 2u * 2 * 544);
  EXPECT_EQ(QuantizedTilesBytes(DType::kQ4_0, 1, 1), 288u);
  EXPECT_EQ(QuantizedTilesBytes(DType::kQ8_0, 0, 64), 0u);
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
