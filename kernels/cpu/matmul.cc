#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "glog/logging.h"
#include "kernels/cpu/quantized_matmul.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/cpu/weight_readers.h"

namespace tandem {
namespace cpu {
namespace {

// Smallest share of the multiply-adds worth handing to another thread.
constexpr int64_t kMinFmaPerThread = 1 << 16;
// Output columns per work unit of the parallel split (the block formats: a tile).
constexpr int kColumnsPerUnit = 8;

// ---- portable ----

// One output element (the tail lanes that k does not reach stay untouched, which is
// the same as adding zeros).
template <typename Reader>
void MatMulRangePortable(const float* x, int rows, const Reader& w, int out_dim, int in_dim,
                         int col_begin, int col_end, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + size_t(r) * in_dim;
    for (int o = col_begin; o < col_end; ++o) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int k = 0;
      for (; k + 8 <= in_dim; k += 8) {
        for (int j = 0; j < 8; ++j) acc[j] += xr[k + j] * w.At(o, k + j);
      }
      for (int j = 0; k + j < in_dim; ++j) acc[j] += xr[k + j] * w.At(o, k + j);
      out[size_t(r) * out_dim + o] = ReduceTree8(acc);
    }
  }
}

#if defined(TANDEM_HAVE_AVX2_KERNELS)

// One chunk of 8 values of k at `k`: the weights Load8(blocks[c], offset), `offset` being
// k's distance from where the step state `blocks` was fetched, times the rows of x at k,
// one fused multiply-add per (row, column).
template <int RB, int CB, typename Reader>
TANDEM_AVX2 inline void Chunk(const float* x, const Reader& w, const typename Reader::Block* blocks,
                              int in_dim, int k, int offset, __m256 (&acc)[RB][CB]) {
  __m256 wv[CB];
#pragma GCC unroll 8
  for (int c = 0; c < CB; ++c) wv[c] = w.Load8(blocks[c], offset);
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
    const __m256 xv = InRegister(_mm256_loadu_ps(x + size_t(r) * in_dim + k));
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
  }
}

// RB rows x CB output columns starting at column `col`: RB*CB 8-lane accumulators over
// k, then StoreTile. Every instantiation performs the same operations per element.
template <int RB, int CB, typename Reader>
TANDEM_AVX2 inline void Tile(const float* x, const Reader& w, int col, int in_dim, float* out,
                             int out_dim) {
  __m256 acc[RB][CB];
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  // Steps of Reader::kStep values of k (a cache line of each weight row) whose
  // per-column state (row pointer) is fetched once; then whole chunks of 8 of a last
  // partial step; then the masked tail. The chunks of 8 run in k order either way.
  // With several rows each weight line is used longer than one row's streams take to
  // bring the next in, so every step also asks for the same line of the next tile's
  // columns (clamped to the matrix): that tile is in L2 when its turn comes.
  size_t next[CB];
#pragma GCC unroll 8
  for (int c = 0; c < CB; ++c) next[c] = size_t(std::min(col + CB + c, out_dim - 1));
  typename Reader::Block blocks[CB];
  int k = 0;
  for (; k + Reader::kStep <= in_dim; k += Reader::kStep) {
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) blocks[c] = w.BlockAt(size_t(col) + c, k);
    if constexpr (RB > 1) {
#pragma GCC unroll 8
      for (int c = 0; c < CB; ++c) w.Prefetch(next[c], k);
    }
#pragma GCC unroll 4
    for (int s = 0; s < Reader::kStep; s += 8) Chunk<RB, CB>(x, w, blocks, in_dim, k + s, s, acc);
  }
  if (k < in_dim) {
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) blocks[c] = w.BlockAt(size_t(col) + c, k);
    for (const int base = k; k + 8 <= in_dim; k += 8) {
      Chunk<RB, CB>(x, w, blocks, in_dim, k, k - base, acc);
    }
  }
  if (k < in_dim) {
    const __m256i mask = TailMask(in_dim - k);
    __m256 wv[CB];
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) wv[c] = w.LoadTail(size_t(col) + c, k, in_dim - k);
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
      const __m256 xv = _mm256_maskload_ps(x + size_t(r) * in_dim + k, mask);
#pragma GCC unroll 8
      for (int c = 0; c < CB; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  StoreTile(acc, out, out_dim);
}

// Runs Tile<RB, cb> for a runtime cb in 1..8.
template <int RB, typename Reader>
TANDEM_AVX2 void TileAnyWidth(int cb, const float* x, const Reader& w, int col, int in_dim,
                              float* out, int out_dim) {
  switch (cb) {
    case 1:
      return Tile<RB, 1>(x, w, col, in_dim, out, out_dim);
    case 2:
      return Tile<RB, 2>(x, w, col, in_dim, out, out_dim);
    case 3:
      return Tile<RB, 3>(x, w, col, in_dim, out, out_dim);
    case 4:
      return Tile<RB, 4>(x, w, col, in_dim, out, out_dim);
    case 5:
      return Tile<RB, 5>(x, w, col, in_dim, out, out_dim);
    case 6:
      return Tile<RB, 6>(x, w, col, in_dim, out, out_dim);
    case 7:
      return Tile<RB, 7>(x, w, col, in_dim, out, out_dim);
    default:
      return Tile<RB, 8>(x, w, col, in_dim, out, out_dim);
  }
}

// RB rows against output columns [col_begin, col_end) in tiles of CB columns.
template <int RB, int CB, typename Reader>
TANDEM_AVX2 void Sweep(const float* x, const Reader& w, int out_dim, int in_dim, int col_begin,
                       int col_end, float* out) {
  int c = col_begin;
  for (; c + CB <= col_end; c += CB) Tile<RB, CB>(x, w, c, in_dim, out + c, out_dim);
  if (c < col_end) TileAnyWidth<RB>(col_end - c, x, w, c, in_dim, out + c, out_dim);
}

// Sweep over rows [0, rb) of x for rb in 1..kMaxTileRows, with the tile width that keeps
// rb * width accumulators, the width's weight vectors and one x vector in the 16 AVX2
// registers: every weight vector is loaded (and widened) once for all rb rows.
constexpr int kMaxTileRows = 6;

template <typename Reader>
TANDEM_AVX2 void SweepRows(int rb, const float* x, const Reader& w, int out_dim, int in_dim,
                           int col_begin, int col_end, float* out) {
  switch (rb) {
    case 1:
      return Sweep<1, 8>(x, w, out_dim, in_dim, col_begin, col_end, out);
    case 2:
      return Sweep<2, 4>(x, w, out_dim, in_dim, col_begin, col_end, out);
    case 3:
      return Sweep<3, 3>(x, w, out_dim, in_dim, col_begin, col_end, out);
    case 4:
      return Sweep<4, 3>(x, w, out_dim, in_dim, col_begin, col_end, out);
    case 5:
      return Sweep<5, 2>(x, w, out_dim, in_dim, col_begin, col_end, out);
    default:
      return Sweep<6, 2>(x, w, out_dim, in_dim, col_begin, col_end, out);
  }
}

// Up to kMaxTileRows rows: one sweep, so the weights are streamed once for all rows.
// More rows: column panels sized so a panel of w stays in cache while every row block
// passes over it, in blocks of 4 rows and a last block of 3..6.
template <typename Reader>
TANDEM_AVX2 void MatMulRangeAvx2(const float* x, int rows, const Reader& w, int out_dim, int in_dim,
                                 int col_begin, int col_end, float* out) {
  if (rows <= kMaxTileRows) return SweepRows(rows, x, w, out_dim, in_dim, col_begin, col_end, out);
  const int panel = std::max(24, (8192 / std::max(in_dim, 1)) / 24 * 24);
  for (int p = col_begin; p < col_end; p += panel) {
    const int pe = std::min(col_end, p + panel);
    int r = 0;
    for (; rows - r > kMaxTileRows; r += 4) {
      SweepRows(4, x + size_t(r) * in_dim, w, out_dim, in_dim, p, pe, out + size_t(r) * out_dim);
    }
    SweepRows(rows - r, x + size_t(r) * in_dim, w, out_dim, in_dim, p, pe,
              out + size_t(r) * out_dim);
  }
}

#endif  // TANDEM_HAVE_AVX2_KERNELS

// Calls range(col_begin, col_end) over output columns [0, out_dim) split across `pool`
// in units of `unit` columns; rows * in_dim multiply-adds per column.
template <typename RangeFn>
void SplitColumns(ThreadPool* pool, int rows, int out_dim, int in_dim, int unit,
                  const RangeFn& range) {
  if (rows <= 0 || out_dim <= 0) return;
  auto units_range = [&](int64_t unit_begin, int64_t unit_end) {
    range(static_cast<int>(unit_begin * unit),
          static_cast<int>(std::min<int64_t>(out_dim, unit_end * unit)));
  };
  const int64_t units = (out_dim + unit - 1) / unit;
  const int64_t fma_per_unit = int64_t(rows) * in_dim * unit;
  const int64_t min_units =
      std::max<int64_t>(1, kMinFmaPerThread / std::max<int64_t>(1, fma_per_unit));
  if (pool == nullptr) {
    units_range(0, units);
  } else {
    pool->ParallelFor(units, units_range, min_units);
  }
}

// Runs the float kernel of `level` over `reader`, split over output columns.
template <typename Reader>
void MatMulWith(SimdLevel level, ThreadPool* pool, const float* x, int rows, const Reader& w,
                int out_dim, int in_dim, float* out) {
  SplitColumns(pool, rows, out_dim, in_dim, kColumnsPerUnit, [&](int col_begin, int col_end) {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
    if (UsesAvx2(level)) {
      MatMulRangeAvx2(x, rows, w, out_dim, in_dim, col_begin, col_end, out);
      return;
    }
#endif
    MatMulRangePortable(x, rows, w, out_dim, in_dim, col_begin, col_end, out);
  });
}

// The tiled view of a q8_0/q4_0 matrix.
QuantizedTiles Tiles(const WeightMatrix& w) {
  return QuantizedTiles{w.dtype, static_cast<const uint8_t*>(w.data), w.out_dim, w.in_dim};
}

// The integer path of q8_0 and q4_0 (kernels/cpu/quantized_matmul.h): x quantized per
// block once, into a buffer of the calling thread, then the split in whole tiles.
void BlockQuantizedMatMul(SimdLevel level, ThreadPool* pool, const float* x, int rows,
                          const WeightMatrix& w, float* out) {
  if (rows <= 0 || w.out_dim <= 0) return;
  CHECK(w.data != nullptr) << "MatMul: " << DTypeName(w.dtype) << " weight without data";
  // A named reference: inside the lambda a thread_local name would be each worker's own.
  thread_local QuantizedRows buffer;
  QuantizedRows& quantized = buffer;
  QuantizeRows(level, x, rows, w.in_dim, &quantized);
  const QuantizedTiles tiles = Tiles(w);
  SplitColumns(pool, rows, w.out_dim, w.in_dim, kTileColumns, [&](int col_begin, int col_end) {
    QuantizedMatMulRange(level, quantized, tiles, col_begin, col_end, out);
  });
}

// Calls fn(reader) with the reader of w's float format (f32, bf16, f16).
template <typename Fn>
void WithReader(const WeightMatrix& w, const Fn& fn) {
  switch (w.dtype) {
    case DType::kF32:
      return fn(F32Reader{static_cast<const float*>(w.data), w.in_dim});
    case DType::kBF16:
      return fn(Bf16Reader{static_cast<const uint16_t*>(w.data), w.in_dim});
    case DType::kF16:
      return fn(F16Reader{static_cast<const uint16_t*>(w.data), w.in_dim});
    case DType::kQ8_0:
    case DType::kQ4_0:
      break;
  }
  LOG(FATAL) << "MatMul: no float reader for weight dtype " << DTypeName(w.dtype);
}

}  // namespace

void MatMul(SimdLevel level, ThreadPool* pool, const float* x, int rows, const WeightMatrix& w,
            float* out) {
  if (IsBlockQuantized(w.dtype)) return BlockQuantizedMatMul(level, pool, x, rows, w, out);
  WithReader(w, [&](const auto& reader) {
    MatMulWith(level, pool, x, rows, reader, w.out_dim, w.in_dim, out);
  });
}

void MatMul(SimdLevel level, ThreadPool* pool, const float* x, int rows, const float* w,
            int out_dim, int in_dim, float* out) {
  MatMulWith(level, pool, x, rows, F32Reader{w, in_dim}, out_dim, in_dim, out);
}

void WidenRow(const WeightMatrix& w, int row, float* out) {
  if (IsBlockQuantized(w.dtype)) {
    const QuantizedTiles tiles = Tiles(w);
    for (int k = 0; k < w.in_dim; ++k) out[k] = tiles.Value(row, k);
    return;
  }
  WithReader(w, [&](const auto& reader) {
    for (int k = 0; k < w.in_dim; ++k) out[k] = reader.At(size_t(row), k);
  });
}

}  // namespace cpu
}  // namespace tandem
