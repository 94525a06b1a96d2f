// The q8_0 block quantization of weight rows (format in kernels/backend.h, DType::kQ8_0;
// file layout in docs/architecture.md "Weight formats"): each row is cut into blocks of
// kQ8BlockSize values (the last block may be shorter); a block stores the f16 scale
// d = max|v| / 127 (rounded to f16) and int8 quants q = round(v / d), clamped to
// [-127, 127] (all zero when d is 0). Dequantized value: float(q) * float(d).
#ifndef TANDEM_MODEL_Q8_0_H_
#define TANDEM_MODEL_Q8_0_H_

#include <cstdint>

#include "kernels/backend.h"

namespace tandem {

// Quantizes one row of `n` float values into `quants` (n int8) and `scales`
// (Q8BlocksPerRow(n) f16 bit patterns). Non-finite inputs are a caller error: a NaN
// quantizes to 0, an infinity makes its block's scale infinite.
void QuantizeQ8Row(const float* values, int64_t n, int8_t* quants, uint16_t* scales);

// The float32 value of one quantized row: out[k] = float(quants[k]) * float(scale of k's
// block), k < n.
void DequantizeQ8Row(const int8_t* quants, const uint16_t* scales, int64_t n, float* out);

}  // namespace tandem

#endif  // TANDEM_MODEL_Q8_0_H_
