// Conversions between float32 and the 16-bit floating-point formats stored in
// checkpoints: IEEE 754 binary16 ("f16", "half") and bfloat16 ("bf16").
// Every conversion handles zeros, subnormals, infinities and NaN; float -> 16-bit
// rounds to nearest, ties to even (NaN stays NaN, overflow goes to infinity).
#ifndef TANDEM_MODEL_FLOAT16_H_
#define TANDEM_MODEL_FLOAT16_H_

#include <cstdint>

namespace tandem {

// binary16 bits -> float (exact: every half value is representable in float).
float HalfToFloat(uint16_t bits);
// float -> binary16 bits, round to nearest even.
uint16_t FloatToHalf(float value);

// bfloat16 bits -> float (exact: bf16 is the top half of a float).
float BFloat16ToFloat(uint16_t bits);
// float -> bfloat16 bits, round to nearest even; NaN maps to a quiet NaN.
uint16_t FloatToBFloat16(float value);

}  // namespace tandem

#endif  // TANDEM_MODEL_FLOAT16_H_
