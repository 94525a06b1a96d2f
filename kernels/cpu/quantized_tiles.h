// The CPU backend's in-memory layout of a q8_0 or q4_0 weight matrix, "quantized tiles":
// made once at upload from the row-major file layout of kernels/backend.h, so that the
// integer matmul (kernels/cpu/quantized_matmul.h) reads every tile as a few sequential
// streams and multiplies 16 output columns per vector instruction.
//
// Layout. The [out_dim, in_dim] matrix is cut into column tiles of kTileColumns = 16
// output columns (weight rows) o in [16 t, 16 t + 16); a tile holds all blocks =
// Q8BlocksPerRow(in_dim) blocks of 32 values of k of its columns, as 64-byte lines: line
// u of block b holds one group of 4 values of k for the 16 columns, byte 4 c + i for
// column 16 t + c (i in 0..3). Tile t is TileBytes() bytes at data + t * TileBytes():
// first every block's line 0, in block order, then every block's line 1, and so on
// (Line(t, b, u) = tile start + (u * blocks + b) * 64), then the scales (16 f16 per block
// in column order, 32 bytes each, in block order).
//  * q8_0, 8 lines per block: line u holds the int8 quants at k = 32 b + 4 u + i.
//  * q4_0, 4 lines per block: line u holds the nibbles q + 8 at k = 32 b + 4 u + i (low
//    nibble) and k = 32 b + 16 + 4 u + i (high nibble).
// A line is the operand of one 16-lane integer dot-product instruction whose lanes are
// the columns; the lines of a block lie in 8 (q4_0: 4) separate sequential streams, one
// per line index, which the hardware prefetchers follow side by side (one interleaved
// stream per tile kept a core's memory-level parallelism, and multi-row speed, lower). For
// a whole block the 4-byte groups are the file's bytes moved as they are (q4_0: the
// file's byte j holds values j and 16 + j of a block, the same pairing). Values past
// in_dim and columns past out_dim hold the quant 0 (q4_0: nibble 8), the latter also
// scale 0. The size is the file's quants plus scales for whole tiles and blocks: 34
// (q8_0) or 18 (q4_0) bytes per 32 values.
#ifndef TANDEM_KERNELS_CPU_QUANTIZED_TILES_H_
#define TANDEM_KERNELS_CPU_QUANTIZED_TILES_H_

#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cpu/half.h"

namespace tandem {
namespace cpu {

constexpr int kTileColumns = 16;
constexpr int kTileGroupBytes = 64;  // One group of 4 values of k for the 16 columns.
constexpr int kTileScaleBytes = kTileColumns * 2;

// A view of a tiled q8_0/q4_0 matrix; `data` (not owned) holds
// QuantizedTilesBytes(dtype, out_dim, in_dim) bytes (64-byte aligned is fastest: a block
// line is then one cache line).
struct QuantizedTiles {
  DType dtype = DType::kQ8_0;  // kQ8_0 or kQ4_0.
  const uint8_t* data = nullptr;
  int out_dim = 0;
  int in_dim = 0;

  int blocks() const { return static_cast<int>(Q8BlocksPerRow(in_dim)); }
  int tiles() const { return (out_dim + kTileColumns - 1) / kTileColumns; }
  // 64-byte lines per block: 8 (q8_0) or 4 (q4_0).
  int LinesPerBlock() const { return dtype == DType::kQ4_0 ? 4 : 8; }
  // Bytes from a block's line u to its line u + 1.
  size_t LineStride() const { return size_t(blocks()) * kTileGroupBytes; }
  size_t TileBytes() const {
    return size_t(blocks()) * (size_t(LinesPerBlock()) * kTileGroupBytes + kTileScaleBytes);
  }
  const uint8_t* Line(int tile, int block, int line) const {
    return data + size_t(tile) * TileBytes() + size_t(line) * LineStride() +
           size_t(block) * kTileGroupBytes;
  }
  const uint16_t* BlockScales(int tile, int block) const {
    return reinterpret_cast<const uint16_t*>(data + size_t(tile) * TileBytes() +
                                             size_t(LinesPerBlock()) * LineStride() +
                                             size_t(block) * kTileScaleBytes);
  }
  // The quant of column o < 16 tiles() at k < 32 blocks() (0 past the matrix).
  int Quant(int o, int k) const;
  // Scale of column o's block b as float32 (0 past out_dim).
  float Scale(int o, int b) const {
    return F16ToFloat(BlockScales(o / kTileColumns, b)[o % kTileColumns]);
  }
  // Element (o, k) as float32: float(quant) * float(scale), one multiply.
  float Value(int o, int k) const { return float(Quant(o, k)) * Scale(o, k / kQ8BlockSize); }
};

// Bytes of the tiled layout of a [out_dim, in_dim] q8_0 or q4_0 matrix.
size_t QuantizedTilesBytes(DType dtype, int64_t out_dim, int64_t in_dim);

// Writes the tiled layout of a q8_0 (`quants` int8 [out_dim, in_dim]) or q4_0 (`quants`
// packed nibbles [out_dim, Q4BytesPerRow(in_dim)]) matrix with f16 `scales` [out_dim,
// Q8BlocksPerRow(in_dim)] (kernels/backend.h) to `out` (QuantizedTilesBytes bytes,
// overwritten whole). Returns the view of `out`.
QuantizedTiles PackQuantizedTiles(DType dtype, const void* quants, const uint16_t* scales,
                                  int out_dim, int in_dim, uint8_t* out);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_QUANTIZED_TILES_H_
