// Internal to the integer q8_0/q4_0 matmul (kernels/cpu/quantized_matmul.h): how each
// block-quantized weight format is read, and the row/column blocking shared by its AVX2
// (quantized_matmul.cc) and AVX-512 VNNI (quantized_matmul_vnni.cc) paths.
//
// Each format gives Scale(o, b) and CopyBlock(o, b, out) (block b of weight row o as
// kQ8BlockSize int8 values, zero-padded) for the portable path and short last blocks;
// on x86 also ScaleAvx2(o, b), LoadFull(o, b) (a whole block as 32 signed int8 lanes)
// and LoadUnsigned(o, b) (the same lanes plus kBias, as unsigned bytes: the operand
// vpdpbusd multiplies unsigned).
#ifndef TANDEM_KERNELS_CPU_QUANTIZED_BLOCKS_H_
#define TANDEM_KERNELS_CPU_QUANTIZED_BLOCKS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/backend.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/quantized_matmul.h"
#include "kernels/cpu/vec_math.h"

namespace tandem {
namespace cpu {
namespace quantized_internal {

constexpr int kBlock = kQ8BlockSize;
static_assert(kBlock == 32, "the integer kernels handle blocks of 32 values");

// A q8_0 weight: block b of row o is kBlock int8 quants (fewer in a row's last block)
// with one f16 scale.
struct Q8Blocks {
  static constexpr int kBias = 128;  // int8 q + 128 = the byte q ^ 0x80, in 1..255.
  const int8_t* quants;
  const uint16_t* scales;
  int in_dim;
  int blocks_per_row;
  int full_blocks;  // Blocks of exactly kBlock values per row.
  float Scale(size_t o, int b) const { return F16ToFloat(scales[o * blocks_per_row + b]); }
  // Block b of row o as kBlock int8 values, zero past the row's end.
  void CopyBlock(size_t o, int b, int8_t* out) const {
    const int k0 = b * kBlock, n = std::min(kBlock, in_dim - k0);
    std::memset(out, 0, kBlock);
    std::memcpy(out, quants + o * in_dim + k0, n);
  }
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  TANDEM_AVX2 float ScaleAvx2(size_t o, int b) const {
    return _cvtsh_ss(scales[o * blocks_per_row + b]);
  }
  static constexpr int kBlockBytes = kBlock;
  const void* BlockPointer(size_t o, int b) const { return quants + o * in_dim + b * kBlock; }
  TANDEM_AVX2 __m256i LoadFull(size_t o, int b) const {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(BlockPointer(o, b)));
  }
  TANDEM_AVX2 __m256i LoadUnsigned(size_t o, int b) const {
    return _mm256_xor_si256(LoadFull(o, b), _mm256_set1_epi8(-128));
  }
#endif
};

// A q4_0 weight (layout in kernels/backend.h): block b of row o is the 16 bytes at
// b * 16 of the row's packed bytes (ceil(n / 2) for a short last block of n values).
struct Q4Blocks {
  static constexpr int kBias = 8;  // The stored nibble is q + 8, in 0..15.
  const uint8_t* packed;
  const uint16_t* scales;
  int in_dim;
  int blocks_per_row;
  int full_blocks;
  int64_t row_bytes;
  float Scale(size_t o, int b) const { return F16ToFloat(scales[o * blocks_per_row + b]); }
  // Block b of row o as kBlock int8 values in [-8, 7], zero past the row's end.
  void CopyBlock(size_t o, int b, int8_t* out) const {
    const int n = std::min(kBlock, in_dim - b * kBlock), half = (n + 1) / 2;
    const uint8_t* bytes = packed + o * row_bytes + size_t(b) * (kBlock / 2);
    std::memset(out, 0, kBlock);
    for (int i = 0; i < half; ++i) {
      out[i] = static_cast<int8_t>((bytes[i] & 15) - 8);
      if (half + i < n) out[half + i] = static_cast<int8_t>((bytes[i] >> 4) - 8);
    }
  }
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  TANDEM_AVX2 float ScaleAvx2(size_t o, int b) const {
    return _cvtsh_ss(scales[o * blocks_per_row + b]);
  }
  // The nibbles as bytes 0..15: low nibbles are values 0..15, high nibbles 16..31.
  static constexpr int kBlockBytes = kBlock / 2;
  const void* BlockPointer(size_t o, int b) const {
    return packed + o * row_bytes + size_t(b) * kBlockBytes;
  }
  TANDEM_AVX2 __m256i LoadUnsigned(size_t o, int b) const {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(BlockPointer(o, b)));
    const __m128i low_mask = _mm_set1_epi8(15);
    const __m128i low = _mm_and_si128(bytes, low_mask);
    const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), low_mask);
    return _mm256_set_m128i(high, low);
  }
  TANDEM_AVX2 __m256i LoadFull(size_t o, int b) const {
    return _mm256_sub_epi8(LoadUnsigned(o, b), _mm256_set1_epi8(kBias));
  }
#endif
};

// Calls sweep(rb, row0, c0, c1) so that every row of x [0, rows) meets every output
// column of [col_begin, col_end) once, in blocks of rb <= max_rows rows: up to max_rows
// rows are one block over the whole range (each weight block is loaded once for all
// rows); more rows go over column panels of about 16 KB of weights (in_dim values per
// column, held in cache while every row block passes) in blocks of 4 rows and a last
// block of 1..max_rows (max_rows >= 4).
template <typename SweepFn>
void ForEachRowBlock(int rows, int in_dim, int max_rows, int col_begin, int col_end,
                     const SweepFn& sweep) {
  if (rows <= max_rows) return sweep(rows, 0, col_begin, col_end);
  const int panel = std::max(8, (16384 / std::max(in_dim, 1)) / 8 * 8);
  for (int p = col_begin; p < col_end; p += panel) {
    const int pe = std::min(col_end, p + panel);
    int r = 0;
    for (; rows - r > max_rows; r += 4) sweep(4, r, p, pe);
    sweep(rows - r, r, p, pe);
  }
}

#if defined(TANDEM_HAVE_AVX2_KERNELS)
// Asks for blocks [b0, b0 + 8) of weight row `col + CB + c` (column c of the next tile,
// clamped to the matrix) into L2. Both paths' Tile() ask for one column per block they
// compute (block b0 + j: column j, for j < CB), so the next tile's weights arrive while
// this one computes, spread over the tile rather than in one burst: a burst of all CB
// columns' lines at the start of each 8-block group made 1-row q8_0/q4_0 stream 1.3-2x
// slower from DRAM on this EPYC (bench/README.md, "Prefetches spread over the tile").
template <int CB, typename Blocks>
TANDEM_AVX2 inline void PrefetchNextTileColumn(const Blocks& w, int col, int out_dim, int b0,
                                               int c) {
  const char* p =
      static_cast<const char*>(w.BlockPointer(size_t(std::min(col + CB + c, out_dim - 1)), b0));
#pragma GCC unroll 4
  for (int line = 0; line < 8 * Blocks::kBlockBytes; line += 64) PrefetchLine(p + line);
}

// The AVX-512 VNNI path (quantized_matmul_vnni.cc): out[r, o] for every row of x and o in
// [col_begin, col_end), bitwise the AVX2 path's values. Only on a CPU with
// CpuHasAvx512Vnni().
void RangeVnni(const QuantizedRows& x, const Q8Blocks& w, int out_dim, int col_begin, int col_end,
               float* out);
void RangeVnni(const QuantizedRows& x, const Q4Blocks& w, int out_dim, int col_begin, int col_end,
               float* out);
#endif

}  // namespace quantized_internal
}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_QUANTIZED_BLOCKS_H_
