// Internal to the integer q8_0/q4_0 matmul (kernels/cpu/quantized_matmul.h): its AVX-512
// VNNI path, compiled in quantized_matmul_vnni.cc with function target attributes only.
#ifndef TANDEM_KERNELS_CPU_QUANTIZED_MATMUL_VNNI_H_
#define TANDEM_KERNELS_CPU_QUANTIZED_MATMUL_VNNI_H_

#include "kernels/cpu/quantized_matmul.h"
#include "kernels/cpu/quantized_tiles.h"

namespace tandem {
namespace cpu {
namespace quantized_internal {

#if defined(__x86_64__)
// out[r, o] for every row of x and o in [col_begin, col_end) (col_end <= w.out_dim),
// bitwise the portable and AVX2 values. Only on a CPU with CpuHasAvx512Vnni().
void RangeVnni(const QuantizedRows& x, const QuantizedTiles& w, int col_begin, int col_end,
               float* out);
#endif

}  // namespace quantized_internal
}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_QUANTIZED_MATMUL_VNNI_H_
