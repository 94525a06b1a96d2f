#include "model/q4_0.h"

#include <algorithm>
#include <cmath>

#include "model/float16.h"

namespace tandem {
namespace {

// Byte and nibble (0 low, 1 high) of value k of a packed row of n values.
struct NibblePosition {
  int64_t byte;
  int high;
};
NibblePosition PositionOf(int64_t n, int64_t k) {
  const int64_t begin = k / kQ8BlockSize * kQ8BlockSize;
  const int64_t half = (std::min<int64_t>(kQ8BlockSize, n - begin) + 1) / 2, i = k - begin;
  return i < half ? NibblePosition{begin / 2 + i, 0} : NibblePosition{begin / 2 + i - half, 1};
}

}  // namespace

void QuantizeQ4Row(const float* values, int64_t n, uint8_t* packed, uint16_t* scales) {
  std::fill(packed, packed + Q4BytesPerRow(n), uint8_t{0});
  for (int64_t begin = 0, block = 0; begin < n; begin += kQ8BlockSize, ++block) {
    const int64_t end = std::min<int64_t>(n, begin + kQ8BlockSize);
    float max_abs = 0;
    for (int64_t k = begin; k < end; ++k) max_abs = std::max(max_abs, std::fabs(values[k]));
    scales[block] = FloatToHalf(max_abs / 7.0f);
    const float scale = HalfToFloat(scales[block]);
    for (int64_t k = begin; k < end; ++k) {
      const float q = scale == 0 || std::isnan(values[k]) ? 0.0f : std::round(values[k] / scale);
      const int nibble = static_cast<int>(std::clamp(q, -7.0f, 7.0f)) + 8;
      const NibblePosition at = PositionOf(n, k);
      packed[at.byte] |= static_cast<uint8_t>(nibble << (4 * at.high));
    }
  }
}

int Q4QuantAt(const uint8_t* packed, int64_t n, int64_t k) {
  const NibblePosition at = PositionOf(n, k);
  return ((packed[at.byte] >> (4 * at.high)) & 15) - 8;
}

void DequantizeQ4Row(const uint8_t* packed, const uint16_t* scales, int64_t n, float* out) {
  for (int64_t k = 0; k < n; ++k) {
    out[k] = float(Q4QuantAt(packed, n, k)) * HalfToFloat(scales[k / kQ8BlockSize]);
  }
}

}  // namespace tandem
