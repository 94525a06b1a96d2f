// Internal to the float matmul (kernels/cpu/matmul.h): the AVX-512 level's tiles, for
// f32, bf16 and f16 weights (kernels/cpu/weight_readers.h).
//
// Up to 8 rows (decode, verify) the level runs float_tiles.h's 256-bit tiles with 32
// registers. Longer inputs (prefill) run paired tiles: one 512-bit register holds the
// 8-lane accumulators of two rows side by side, lanes 0-7 row 2p and lanes 8-15 row
// 2p + 1, against a weight vector whose two halves are the same 8 widened weights
// (Load8Twice). Each half performs exactly the multiply-adds of a 256-bit tile (lane j
// takes k = j mod 8, chunks of 8 in k order) and ends in the same StoreTile tree, so the
// paired tiles give bitwise the 256-bit tiles' results, and every row count, level and
// batch composition the same value per element. x is read packed by row pairs
// (PackRowPairs): one 512-bit load per pair and chunk.
#ifndef TANDEM_KERNELS_CPU_PAIRED_TILES_H_
#define TANDEM_KERNELS_CPU_PAIRED_TILES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/float_tiles.h"
#include "kernels/cpu/vec_math.h"

#if defined(TANDEM_HAVE_AVX2_KERNELS)

#define TANDEM_PAIR_INLINE TANDEM_AVX512 __attribute__((always_inline)) inline

namespace tandem {
namespace cpu {
namespace float_tiles {

// Packs rows [0, rows) of x (row stride in_dim; rows a multiple of 2 * pairs) in blocks of
// 2 * pairs rows: block b starts at packed + b * 2 * pairs * PackedDepth(in_dim); its chunk
// j (k in [8j, 8j + 8)) holds the block's pairs side by side, 16 floats each, row 2p's 8
// values then row 2p + 1's; values past in_dim are zero. `packed` holds rows *
// PackedDepth(in_dim) floats.
inline void PackRowPairs(const float* x, int rows, int in_dim, int pairs, float* packed) {
  const int depth = PackedDepth(in_dim), chunks = depth / 8, block_rows = 2 * pairs;
  for (int r = 0; r < rows; ++r) {
    const float* src = x + size_t(r) * in_dim;
    float* dst = packed + size_t(r / block_rows) * block_rows * depth + (r % block_rows / 2) * 16 +
                 (r % 2) * 8;
    for (int j = 0; j < chunks; ++j, dst += pairs * 16) {
      const int n = std::min(8, in_dim - 8 * j);
      std::memcpy(dst, src + 8 * j, sizeof(float) * n);
      std::fill(dst + n, dst + 8, 0.0f);
    }
  }
}

// Returns v, which the compiler must hold in a register (InRegister's 512-bit form).
TANDEM_PAIR_INLINE __m512 InRegister512(__m512 v) {
  asm("" : "+v"(v));
  return v;
}

// One chunk of 8 values of k: the P pairs' packed x at xc times the CB weight vectors
// Load8Twice(blocks[c], offset).
template <int P, int CB, typename Reader>
TANDEM_PAIR_INLINE void PairChunk(const float* xc, const typename Reader::Block* blocks, int offset,
                                  __m512 (&acc)[P][CB]) {
  __m512 xv[P];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) xv[p] = InRegister512(_mm512_loadu_ps(xc + p * 16));
#pragma GCC unroll 8
  for (int c = 0; c < CB; ++c) {
    const __m512 wv = InRegister512(Reader::Load8Twice(blocks[c], offset));
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[p][c] = _mm512_fmadd_ps(xv[p], wv, acc[p][c]);
  }
}

// The accumulators of pair p as two 256-bit ones (rows 2p and 2p + 1), and back.
TANDEM_PAIR_INLINE __m256 LowRow(__m512 v) {
  return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
}
TANDEM_PAIR_INLINE __m256 HighRow(__m512 v) {
  return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
}
TANDEM_PAIR_INLINE __m512 JoinRows(__m256 low, __m256 high) {
  return __builtin_shufflevector(low, high, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

// The end of a paired tile's k from `k` to in_dim (as TileTail): whole chunks of the
// partial step, then the last n < 8 values (packed x is zero past in_dim).
template <int P, int CB, typename Reader>
TANDEM_PAIR_INLINE void PairTileTail(const TileArgs<Reader>& a, int col, int k,
                                     __m512 (&acc)[P][CB]) {
  if (k < a.in_dim) {
    typename Reader::Block blocks[CB];
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) blocks[c] = a.w.BlockAt(size_t(col) + c, k);
    for (const int base = k; k + 8 <= a.in_dim; k += 8) {
      PairChunk<P, CB, Reader>(a.packed + size_t(k / 8) * P * 16, blocks, k - base, acc);
    }
  }
  if (k < a.in_dim) {
    const float* xc = a.packed + size_t(k / 8) * P * 16;
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) {
      const __m256 tail = a.w.LoadTail(size_t(col) + c, k, a.in_dim - k);
      const __m512 wv = Twice(tail);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        acc[p][c] = _mm512_fmadd_ps(_mm512_loadu_ps(xc + p * 16), wv, acc[p][c]);
      }
    }
  }
}

// 2P rows (a.packed, one block) x CB output columns starting at column `col`; k in
// [a.k_begin, a.k_end), carried as in Tile.
template <int P, int CB, typename Reader>
TANDEM_PAIR_INLINE void PairTile(const TileArgs<Reader>& a, int col) {
  __m512 acc[P][CB];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) {
      acc[p][c] = a.k_begin > 0 ? JoinRows(_mm256_loadu_ps(CarryAt(a, 2 * p, col + c)),
                                           _mm256_loadu_ps(CarryAt(a, 2 * p + 1, col + c)))
                                : _mm512_setzero_ps();
    }
  }
  size_t next[CB];  // The next tile's columns, prefetched as in Tile.
#pragma GCC unroll 8
  for (int c = 0; c < CB; ++c) next[c] = size_t(std::min(col + CB + c, a.out_dim - 1));
  const Reader w = a.w;
  typename Reader::Block blocks[CB];
  const float* next_x = a.prefetch_x;  // This tile's share of the next block's x.
  int next_x_lines = a.prefetch_lines;
  int k = a.k_begin;
  for (; k + Reader::kStep <= a.k_end; k += Reader::kStep) {
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) blocks[c] = w.BlockAt(size_t(col) + c, k);
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) w.Prefetch(next[c], k);
    if (next_x_lines > 0) {
      PrefetchLine(next_x);
      PrefetchLine(next_x + 16);
      next_x += 32, next_x_lines -= 2;
    }
    const float* xc = a.packed + size_t(k / 8) * P * 16;
#pragma GCC unroll 4
    for (int s = 0; s < Reader::kStep; s += 8) {
      PairChunk<P, CB, Reader>(xc + (s / 8) * P * 16, blocks, s, acc);
    }
  }
  if (a.k_end < a.in_dim) {
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
      for (int c = 0; c < CB; ++c) {
        _mm256_storeu_ps(CarryAt(a, 2 * p, col + c), LowRow(acc[p][c]));
        _mm256_storeu_ps(CarryAt(a, 2 * p + 1, col + c), HighRow(acc[p][c]));
      }
    }
    return;
  }
  PairTileTail<P, CB>(a, col, k, acc);
  __m256 rows[2 * P][CB];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) rows[2 * p][c] = LowRow(acc[p][c]);
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) rows[2 * p + 1][c] = HighRow(acc[p][c]);
  }
  StoreTile(rows, a.out + col, a.out_dim);
}

// PairTile<P, cb> for a runtime cb in 1..CB.
template <int P, int CB, typename Reader>
TANDEM_PAIR_INLINE void PairTileUpTo(int cb, const TileArgs<Reader>& a, int col) {
  if constexpr (CB > 1) {
    if (cb < CB) return PairTileUpTo<P, CB - 1>(cb, a, col);
  }
  PairTile<P, CB>(a, col);
}

// One packed block of 2P rows against output columns [col_begin, col_end); each tile
// brings its share of a.prefetch_x's lines into L2.
template <int P, int CB, typename Reader>
TANDEM_PAIR_INLINE void PairSweep(const TileArgs<Reader>& a, int col_begin, int col_end) {
  const int tiles = (col_end - col_begin + CB - 1) / CB;
  TileArgs<Reader> tile = a;
  for (int t = 0, c = col_begin; c < col_end; ++t, c += CB) {
    const int first = a.prefetch_lines * t / tiles, end = a.prefetch_lines * (t + 1) / tiles;
    tile.prefetch_x = a.prefetch_x + size_t(first) * 16;
    tile.prefetch_lines = end - first;
    if (c + CB <= col_end) {
      PairTile<P, CB>(tile, c);
    } else {
      PairTileUpTo<P, CB - 1>(col_end - c, tile, c);
    }
  }
}

// 32 vector registers. Sweeps of up to 8 rows: the 256-bit tiles (AVX-512 VL encodings);
// prefill blocks: 4 pairs x 6 columns (24 accumulators, 6 weights, 4 pairs of x).
struct Avx512Shapes {
  template <int RB, int CB, typename Reader>
  TANDEM_AVX512 static void Sweep(const TileArgs<Reader>& a, int col_begin, int col_end) {
    float_tiles::Sweep<RB, CB>(a, col_begin, col_end);
  }
  template <typename Reader>
  TANDEM_AVX512 static void BlockSweep(const TileArgs<Reader>& a, int col_begin, int col_end) {
    PairSweep<kPairs, 6>(a, col_begin, col_end);
  }
  static constexpr int kMaxTileRows = 8;
  static constexpr int kPairs = 4;
  static constexpr int kBlockRows = 2 * kPairs;
  static constexpr int kPanelColumns = 48;  // 256 rows: 4-11 % faster than 24.
  static constexpr int Columns(int rows) {
    constexpr int kColumns[] = {0, 8, 4, 3, 3, 2, 2, 3, 3};
    return kColumns[rows];
  }
  // Whole blocks of a panel over `rows` > kMaxTileRows; the rest (< kBlockRows) is swept.
  static constexpr int FullBlocks(int rows) { return rows / kBlockRows; }
  // x for rows > kMaxTileRows: its whole blocks packed into `copy` (a.packed, 64-byte
  // aligned: each pair's chunk is one cache line).
  template <typename Reader>
  static void PrepareX(int rows, std::vector<float>* copy, TileArgs<Reader>* a) {
    const int packed_rows = FullBlocks(rows) * kBlockRows;
    copy->resize(size_t(packed_rows) * PackedDepth(a->in_dim) + 16);
    const size_t misalign = reinterpret_cast<uintptr_t>(copy->data()) % 64 / sizeof(float);
    float* packed = copy->data() + (misalign == 0 ? 0 : 16 - misalign);
    PackRowPairs(a->x, packed_rows, a->in_dim, kPairs, packed);
    a->packed = packed;
  }
};

}  // namespace float_tiles
}  // namespace cpu
}  // namespace tandem

#undef TANDEM_PAIR_INLINE

#endif  // TANDEM_HAVE_AVX2_KERNELS

#endif  // TANDEM_KERNELS_CPU_PAIRED_TILES_H_
