#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "glog/logging.h"
#include "kernels/cpu/float_tiles.h"
#include "kernels/cpu/paired_tiles.h"
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
// Largest copy of x (floats) a thread keeps between float matmul calls (16 MB).
constexpr size_t kKeptCopyFloats = size_t(4) << 20;

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

// The float path of an AVX2 `level` over all columns, split across `pool`: with more
// rows than one sweep takes, x is first copied as the level's row blocks read it.
template <typename Shapes, typename Reader>
void MatMulTiled(ThreadPool* pool, const float* x, int rows, const Reader& w, int out_dim,
                 int in_dim, float* out) {
  float_tiles::TileArgs<Reader> args{x, in_dim, in_dim, w, out, out_dim, 0, in_dim};
  thread_local std::vector<float> copy;
  if (rows > Shapes::kMaxTileRows) Shapes::PrepareX(rows, &copy, &args);
  SplitColumns(pool, rows, out_dim, in_dim, kColumnsPerUnit, [&](int col_begin, int col_end) {
    float_tiles::MatMulRange<Shapes>(args, rows, col_begin, col_end);
  });
  // A long prompt's copy is not kept for the rest of the thread's life.
  if (copy.capacity() > kKeptCopyFloats) std::vector<float>().swap(copy);
}

template <typename Reader>
void MatMulAvx(SimdLevel level, ThreadPool* pool, const float* x, int rows, const Reader& w,
               int out_dim, int in_dim, float* out) {
  if (level == SimdLevel::kAvx512Vnni) {
    return MatMulTiled<float_tiles::Avx512Shapes>(pool, x, rows, w, out_dim, in_dim, out);
  }
  MatMulTiled<float_tiles::Avx2Shapes>(pool, x, rows, w, out_dim, in_dim, out);
}

#endif  // TANDEM_HAVE_AVX2_KERNELS

// Runs the float kernel of `level` over `reader`, split over output columns.
template <typename Reader>
void MatMulWith(SimdLevel level, ThreadPool* pool, const float* x, int rows, const Reader& w,
                int out_dim, int in_dim, float* out) {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (UsesAvx2(level)) return MatMulAvx(level, pool, x, rows, w, out_dim, in_dim, out);
#endif
  SplitColumns(pool, rows, out_dim, in_dim, kColumnsPerUnit, [&](int col_begin, int col_end) {
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
