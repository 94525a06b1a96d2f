// Internal to the float matmul (kernels/cpu/matmul.h): the 256-bit register tiles, for
// f32, bf16 and f16 weights read through kernels/cpu/weight_readers.h, and the panel loop
// that blocks long inputs.
//
// A tile is RB rows of x against CB output columns: RB * CB 8-lane accumulators over k
// (lane j takes k = j mod 8), one fused multiply-add per (row, column, chunk of 8), then
// the fixed tree of vec_math.h (StoreTile). Every tile shape performs the same operations
// per output element, so the tile shapes (how many registers a level has) decide speed
// only: the AVX2 level (16 vector registers) and the AVX-512 level (the same 256-bit
// instructions with 32 registers, larger tiles, and paired_tiles.h's 512-bit prefill
// blocks) give bitwise the same results.
//
// The tiles are always inlined into a sweep, a function compiled under the level's target
// attribute (its register budget). A TileShapes policy (Avx2Shapes here, Avx512Shapes in
// paired_tiles.h) provides
//   template <int RB, int CB, typename Reader>
//   static void Sweep(args, col_begin, col_end);       // float_tiles::Sweep, level's target
//   template <typename Reader>
//   static void BlockSweep(args, col_begin, col_end);  // one panel row block of kBlockRows
//   template <typename Reader>
//   static void PrepareX(rows, copy, args);            // x as BlockSweep reads it
//   static constexpr int kMaxTileRows;        // rows handled by one sweep
//   static constexpr int kBlockRows;          // row block of the panel loop
//   static constexpr int kPanelColumns;       // least panel width (a multiple of 24)
//   static constexpr int Columns(int rows);   // tile width for 1..kMaxTileRows rows
//   static constexpr int FullBlocks(int rows);  // row blocks before the swept rest
#ifndef TANDEM_KERNELS_CPU_FLOAT_TILES_H_
#define TANDEM_KERNELS_CPU_FLOAT_TILES_H_

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/cpu/vec_math.h"

#if defined(TANDEM_HAVE_AVX2_KERNELS)

#define TANDEM_TILE_INLINE TANDEM_AVX2 __attribute__((always_inline)) inline

namespace tandem {
namespace cpu {
namespace float_tiles {

// The operands of a sweep: rows of x `x_stride` floats apart (in_dim values each), the
// weight reader, and out[r * out_dim + o]; the sweep covers k in [k_begin, k_end) (k_end
// < in_dim only at a multiple of 32). A sweep that does not start at k = 0 resumes the
// accumulators of (r, o) from carry[(r * carry_stride + o - carry_col) * 8 + lane]; one
// that does not end at in_dim leaves them there instead of writing out. `packed` is x
// packed by paired_tiles.h's PackRowPairs, for the AVX-512 level's row blocks, and
// [prefetch_x, + 16 * prefetch_lines) the packed x a block sweep brings into L2 for the
// row block after it (a hint).
template <typename Reader>
struct TileArgs {
  const float* x;
  int x_stride;
  int in_dim;
  Reader w;  // A copy (a pointer and in_dim).
  float* out;
  int out_dim;
  int k_begin = 0;
  int k_end = 0;
  float* carry = nullptr;
  int carry_stride = 0;
  int carry_col = 0;
  const float* packed = nullptr;
  const float* prefetch_x = nullptr;
  int prefetch_lines = 0;
};

// Values of k per row of packed x: in_dim rounded up to whole chunks of 8.
inline int PackedDepth(int in_dim) { return (in_dim + 7) / 8 * 8; }

// The carried accumulator of tile row r, column `col` (see TileArgs).
template <typename Reader>
inline float* CarryAt(const TileArgs<Reader>& a, int r, int col) {
  return a.carry + (size_t(r) * a.carry_stride + (col - a.carry_col)) * 8;
}

// One chunk of 8 values of k at `k`: the weights Load8(blocks[c], offset), `offset` being
// k's distance from where the step state `blocks` was fetched, times the rows xr of x at k.
template <int RB, int CB, typename Reader>
TANDEM_TILE_INLINE void Chunk(const Reader& w, const float* const (&xr)[RB],
                              const typename Reader::Block* blocks, int k, int offset,
                              __m256 (&acc)[RB][CB]) {
  __m256 wv[CB];
#pragma GCC unroll 8
  for (int c = 0; c < CB; ++c) wv[c] = w.Load8(blocks[c], offset);
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
    const __m256 xv = InRegister(_mm256_loadu_ps(xr[r] + k));
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
  }
}

// The end of a tile's k from `k` (past the last whole step) to in_dim: whole chunks of 8
// of the partial step, then the masked tail (x and weights read as zero past in_dim).
template <int RB, int CB, typename Reader>
TANDEM_TILE_INLINE void TileTail(const Reader& w, const float* const (&xr)[RB], int col, int k,
                                 int in_dim, __m256 (&acc)[RB][CB]) {
  if (k < in_dim) {
    typename Reader::Block blocks[CB];
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) blocks[c] = w.BlockAt(size_t(col) + c, k);
    for (const int base = k; k + 8 <= in_dim; k += 8)
      Chunk<RB, CB>(w, xr, blocks, k, k - base, acc);
  }
  if (k < in_dim) {
    const __m256i mask = TailMask(in_dim - k);
    __m256 wv[CB];
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) wv[c] = w.LoadTail(size_t(col) + c, k, in_dim - k);
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
      const __m256 xv = _mm256_maskload_ps(xr[r] + k, mask);
#pragma GCC unroll 8
      for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
}

// RB rows x CB output columns starting at column `col`.
template <int RB, int CB, typename Reader>
TANDEM_TILE_INLINE void Tile(const TileArgs<Reader>& a, int col) {
  __m256 acc[RB][CB];
  const bool resume = a.k_begin > 0;
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) {
      acc[r][c] = resume ? _mm256_loadu_ps(CarryAt(a, r, col + c)) : _mm256_setzero_ps();
    }
  }
  // Steps of Reader::kStep values of k (a cache line of each weight row) whose
  // per-column state (row pointer) is fetched once; then whole chunks of 8 of a last
  // partial step; then the masked tail. The chunks of 8 run in k order either way.
  // With a few rows each weight line is used longer than one row's streams take to
  // bring the next in, so every step also asks for the same line of the next tile's
  // columns (clamped to the matrix): that tile is in L2 when its turn comes.
  size_t next[CB];
#pragma GCC unroll 8
  for (int c = 0; c < CB; ++c) next[c] = size_t(std::min(col + CB + c, a.out_dim - 1));
  const float* xr[RB];
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) xr[r] = a.x + size_t(r) * a.x_stride;
  const Reader w = a.w;
  typename Reader::Block blocks[CB];
  int k = a.k_begin;
  for (; k + Reader::kStep <= a.k_end; k += Reader::kStep) {
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) blocks[c] = w.BlockAt(size_t(col) + c, k);
    if constexpr (RB > 1) {
#pragma GCC unroll 8
      for (int c = 0; c < CB; ++c) w.Prefetch(next[c], k);
    }
#pragma GCC unroll 4
    for (int s = 0; s < Reader::kStep; s += 8) Chunk<RB, CB>(w, xr, blocks, k + s, s, acc);
  }
  if (a.k_end < a.in_dim) {
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < CB; ++c) _mm256_storeu_ps(CarryAt(a, r, col + c), acc[r][c]);
    }
    return;
  }
  TileTail<RB, CB>(w, xr, col, k, a.in_dim, acc);
  StoreTile(acc, a.out + col, a.out_dim);
}

// Tile<RB, cb> for a runtime cb in 1..CB.
template <int RB, int CB, typename Reader>
TANDEM_TILE_INLINE void TileUpTo(int cb, const TileArgs<Reader>& a, int col) {
  if constexpr (CB > 1) {
    if (cb < CB) return TileUpTo<RB, CB - 1>(cb, a, col);
  }
  Tile<RB, CB>(a, col);
}

// RB rows against output columns [col_begin, col_end) in tiles of CB columns.
template <int RB, int CB, typename Reader>
TANDEM_TILE_INLINE void Sweep(const TileArgs<Reader>& a, int col_begin, int col_end) {
  int c = col_begin;
  for (; c + CB <= col_end; c += CB) Tile<RB, CB>(a, c);
  if constexpr (CB > 1) {
    if (c < col_end) TileUpTo<RB, CB - 1>(col_end - c, a, c);
  }
}

// Sweep over rows [0, rb) of a.x for rb in RB..Shapes::kMaxTileRows, each row count with
// its tile width (every weight vector is loaded and widened once for all rb rows). Each
// sweep is a function of its own compiled under the level's target (Shapes::Sweep).
template <typename Shapes, int RB = 1, typename Reader>
inline void SweepRows(int rb, const TileArgs<Reader>& a, int col_begin, int col_end) {
  if constexpr (RB < Shapes::kMaxTileRows) {
    if (rb > RB) return SweepRows<Shapes, RB + 1>(rb, a, col_begin, col_end);
  }
  Shapes::template Sweep<RB, Shapes::Columns(RB)>(a, col_begin, col_end);
}

// Asks for the weight lines of columns [col_begin, col_end) at k in [k_begin, k_end) to
// be brought into L2 (hints: never fault). A panel's first row block would otherwise read
// its weights at DRAM speed; the panel loop spreads the next unit's lines over the row
// blocks of the current one.
template <typename Reader>
inline void PrefetchWeights(const Reader& w, int col_begin, int col_end, int k_begin, int k_end) {
  if (k_end <= k_begin) return;
  for (int o = col_begin; o < col_end; ++o) {
    for (int k = k_begin; k < k_end; k += Reader::kStep) {
      __builtin_prefetch(w.BlockAt(size_t(o), k), 0, 2);
    }
    __builtin_prefetch(w.BlockAt(size_t(o), k_end - 1), 0, 2);
  }
}

// Values of k per block of the panel loop: the x rows of a row block stay in L1 while
// they pass over every tile of the panel (a multiple of 32, so blocks end on whole steps).
constexpr int kPanelDepth = 1024;

// Sets block->prefetch_x/prefetch_lines to the packed x of the row block at `row`, k in
// [k, k + kPanelDepth): the block after the current one, whose x a sweep would otherwise
// read from L3 (x past a few row blocks does not stay in L2).
template <typename Shapes, typename Reader>
inline void NextPackedBlock(const TileArgs<Reader>& a, int row, int k, TileArgs<Reader>* block) {
  const int chunks = (std::min(a.in_dim, k + kPanelDepth) - k + 7) / 8;
  block->prefetch_x =
      a.packed + size_t(row) * PackedDepth(a.in_dim) + size_t(k / 8) * Shapes::kBlockRows * 8;
  block->prefetch_lines = chunks * Shapes::kBlockRows / 2;  // 2 rows of 8 floats a line.
}

// out[r, o] for every row of a.x and o in [col_begin, col_end) (a covers all k; a.x and
// a.packed as Shapes::PrepareX left them). Up to kMaxTileRows rows: one sweep, so the
// weights are streamed once for all rows. More rows: column panels (kPanelColumns, or more
// for a short in_dim) sized so a panel of w stays in cache while every row block passes
// over it, k in blocks of kPanelDepth (the accumulators carried between blocks in
// `carry`, the calling thread's buffer), FullBlocks(rows) blocks of kBlockRows rows
// (Shapes::BlockSweep) and a sweep of the rest. Blocking changes no element's order of
// operations.
template <typename Shapes, typename Reader>
inline void MatMulRange(const TileArgs<Reader>& a, int rows, int col_begin, int col_end) {
  if (rows <= Shapes::kMaxTileRows) return SweepRows<Shapes>(rows, a, col_begin, col_end);
  const int panel = std::max(Shapes::kPanelColumns, (8192 / std::max(a.in_dim, 1)) / 24 * 24);
  thread_local std::vector<float> carry;
  const bool carried = a.in_dim > kPanelDepth;
  if (carried) carry.resize(size_t(rows) * panel * 8);
  const int full = Shapes::FullBlocks(rows), rest = rows - full * Shapes::kBlockRows;
  const int blocks = full + (rest > 0);
  for (int p = col_begin; p < col_end; p += panel) {
    const int pe = std::min(col_end, p + panel);
    TileArgs<Reader> block = a;
    block.carry_stride = panel;
    block.carry_col = p;
    for (int k = 0; k < a.in_dim; k += kPanelDepth) {
      block.k_begin = k;
      block.k_end = std::min(a.in_dim, k + kPanelDepth);
      // The unit after this one (the next k block, else the next panel's first).
      int next_col = p, next_end = pe, next_k = block.k_end;
      if (next_k >= a.in_dim) next_col = pe, next_end = std::min(col_end, pe + panel), next_k = 0;
      const int next_k_end = std::min(a.in_dim, next_k + kPanelDepth);
      for (int i = 0, r = 0; i < blocks; ++i, r += Shapes::kBlockRows) {
        PrefetchWeights(a.w, next_col + (next_end - next_col) * i / blocks,
                        next_col + (next_end - next_col) * (i + 1) / blocks, next_k, next_k_end);
        block.x = a.x + size_t(r) * a.x_stride;
        block.out = a.out + size_t(r) * a.out_dim;
        block.carry = carried ? carry.data() + size_t(r) * panel * 8 : nullptr;
        if (i < full) {
          if (a.packed != nullptr) {
            block.packed = a.packed + size_t(r) * PackedDepth(a.in_dim);
            NextPackedBlock<Shapes>(a, i + 1 < full ? r + Shapes::kBlockRows : 0,
                                    i + 1 < full ? k : next_k, &block);
          }
          Shapes::BlockSweep(block, p, pe);
        } else {
          SweepRows<Shapes>(rest, block, p, pe);
        }
      }
    }
  }
}

// 16 vector registers: RB * CB accumulators, CB weight vectors and one x vector; prefill
// blocks of 4 x 3.
struct Avx2Shapes {
  template <int RB, int CB, typename Reader>
  TANDEM_AVX2 static void Sweep(const TileArgs<Reader>& a, int col_begin, int col_end) {
    float_tiles::Sweep<RB, CB>(a, col_begin, col_end);
  }
  template <typename Reader>
  TANDEM_AVX2 static void BlockSweep(const TileArgs<Reader>& a, int col_begin, int col_end) {
    float_tiles::Sweep<kBlockRows, 3>(a, col_begin, col_end);
  }
  static constexpr int kMaxTileRows = 6;
  static constexpr int kBlockRows = 4;
  static constexpr int kPanelColumns = 24;
  static constexpr int Columns(int rows) {
    constexpr int kColumns[] = {0, 8, 4, 3, 3, 2, 2};
    return kColumns[rows];
  }
  // Blocks while more than kMaxTileRows rows are left: the rest is 3..6 rows.
  static constexpr int FullBlocks(int rows) {
    return rows <= kMaxTileRows ? 0 : (rows - kMaxTileRows + kBlockRows - 1) / kBlockRows;
  }
  // x for rows > kMaxTileRows: when in_dim is a multiple of 1024 (rows 4 KB apart would
  // share L1 sets), copied into `copy` with rows one cache line longer.
  template <typename Reader>
  static void PrepareX(int rows, std::vector<float>* copy, TileArgs<Reader>* a) {
    if (a->in_dim % 1024 != 0) return;
    a->x_stride = a->in_dim + 16;
    copy->resize(size_t(rows) * a->x_stride);
    for (int r = 0; r < rows; ++r) {
      std::copy(a->x + size_t(r) * a->in_dim, a->x + size_t(r + 1) * a->in_dim,
                copy->data() + size_t(r) * a->x_stride);
    }
    a->x = copy->data();
  }
};

}  // namespace float_tiles
}  // namespace cpu
}  // namespace tandem

#undef TANDEM_TILE_INLINE

#endif  // TANDEM_HAVE_AVX2_KERNELS

#endif  // TANDEM_KERNELS_CPU_FLOAT_TILES_H_
