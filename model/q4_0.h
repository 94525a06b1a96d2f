// The q4_0 block quantization of weight rows (format and nibble layout in
// kernels/backend.h, DType::kQ4_0; file layout in docs/architecture.md "Weight
// formats"): each row is cut into blocks of kQ8BlockSize values (the last block may be
// shorter); a block stores the f16 scale d = max|v| / 7 (rounded to f16) and 4-bit
// quants q = round(v / d), clamped to [-7, 7] (all zero when d is 0; the format's -8 is
// never written), packed two per byte as the nibble q + 8. Dequantized value:
// float(q) * float(d).
#ifndef TANDEM_MODEL_Q4_0_H_
#define TANDEM_MODEL_Q4_0_H_

#include <cstdint>

#include "kernels/backend.h"

namespace tandem {

// Quantizes one row of `n` float values into `packed` (Q4BytesPerRow(n) bytes) and
// `scales` (Q8BlocksPerRow(n) f16 bit patterns). Non-finite inputs are a caller error: a
// NaN quantizes to 0, an infinity makes its block's scale infinite.
void QuantizeQ4Row(const float* values, int64_t n, uint8_t* packed, uint16_t* scales);

// The quant q in [-8, 7] of value k of a packed row of `n` values.
int Q4QuantAt(const uint8_t* packed, int64_t n, int64_t k);

// The float32 value of one quantized row: out[k] = float(q_k) * float(scale of k's
// block), k < n.
void DequantizeQ4Row(const uint8_t* packed, const uint16_t* scales, int64_t n, float* out);

}  // namespace tandem

#endif  // TANDEM_MODEL_Q4_0_H_
