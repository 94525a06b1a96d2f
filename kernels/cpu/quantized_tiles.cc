#include "kernels/cpu/quantized_tiles.h"

#include <algorithm>
#include <cstring>

#include "glog/logging.h"

namespace tandem {
namespace cpu {
namespace {

// The 32 quant bytes of a block in the tiled encoding (q8_0: int8 values; q4_0: 16
// bytes, byte j holding values j and 16 + j as nibbles q + 8) of column `o`'s block b,
// from the file layout; a short last block of n values padded with zero quants.
void FileBlock(DType dtype, const uint8_t* quants, int in_dim, int o, int b, uint8_t (&out)[32]) {
  const int k0 = b * kQ8BlockSize, n = std::min(kQ8BlockSize, in_dim - k0);
  if (dtype == DType::kQ8_0) {
    std::memset(out, 0, sizeof(out));
    std::memcpy(out, quants + size_t(o) * in_dim + k0, n);
    return;
  }
  const uint8_t* bytes = quants + size_t(o) * Q4BytesPerRow(in_dim) + k0 / 2;
  if (n == kQ8BlockSize) {
    std::memcpy(out, bytes, kQ8BlockSize / 2);
    return;
  }
  // Short block: value i < h = ceil(n / 2) is the low nibble of byte i, h + i the high.
  int values[kQ8BlockSize] = {};
  const int h = (n + 1) / 2;
  for (int i = 0; i < h; ++i) {
    values[i] = (bytes[i] & 15) - 8;
    if (h + i < n) values[h + i] = (bytes[i] >> 4) - 8;
  }
  for (int j = 0; j < kQ8BlockSize / 2; ++j) {
    out[j] = static_cast<uint8_t>((values[j] + 8) | ((values[16 + j] + 8) << 4));
  }
}

}  // namespace

int QuantizedTiles::Quant(int o, int k) const {
  const int p = k % kQ8BlockSize, c = o % kTileColumns, t = o / kTileColumns;
  const int b = k / kQ8BlockSize;
  if (dtype == DType::kQ8_0) return static_cast<int8_t>(Line(t, b, p / 4)[4 * c + p % 4]);
  const int q = p % 16;
  const uint8_t byte = Line(t, b, q / 4)[4 * c + q % 4];
  return (p < 16 ? byte & 15 : byte >> 4) - 8;
}

size_t QuantizedTilesBytes(DType dtype, int64_t out_dim, int64_t in_dim) {
  const int64_t tiles = (out_dim + kTileColumns - 1) / kTileColumns;
  const int64_t per_block = (dtype == DType::kQ4_0 ? 4 : 8) * kTileGroupBytes + kTileScaleBytes;
  return size_t(tiles) * Q8BlocksPerRow(in_dim) * per_block;
}

QuantizedTiles PackQuantizedTiles(DType dtype, const void* quants, const uint16_t* scales,
                                  int out_dim, int in_dim, uint8_t* out) {
  CHECK(IsBlockQuantized(dtype)) << "PackQuantizedTiles: " << DTypeName(dtype);
  const QuantizedTiles tiles{dtype, out, out_dim, in_dim};
  const auto* source = static_cast<const uint8_t*>(quants);
  const int blocks = tiles.blocks(), lines = tiles.LinesPerBlock();
  // Padding columns: quant 0 (q4_0 nibbles 8) and scale 0.
  const uint8_t pad = dtype == DType::kQ4_0 ? 0x88 : 0;
  const uint8_t empty_group[4] = {pad, pad, pad, pad};
  for (int t = 0; t < tiles.tiles(); ++t) {
    for (int b = 0; b < blocks; ++b) {
      auto* block_scales = const_cast<uint16_t*>(tiles.BlockScales(t, b));
      for (int c = 0; c < kTileColumns; ++c) {
        const int o = t * kTileColumns + c;
        uint8_t bytes[32];
        if (o < out_dim) FileBlock(dtype, source, in_dim, o, b, bytes);
        for (int u = 0; u < lines; ++u) {
          std::memcpy(const_cast<uint8_t*>(tiles.Line(t, b, u)) + 4 * c,
                      o < out_dim ? bytes + 4 * u : empty_group, 4);
        }
        block_scales[c] = o < out_dim ? scales[size_t(o) * blocks + b] : 0;
      }
    }
  }
  return tiles;
}

}  // namespace cpu
}  // namespace tandem
