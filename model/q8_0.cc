#include "model/q8_0.h"

#include <algorithm>
#include <cmath>

#include "model/float16.h"

namespace tandem {

void QuantizeQ8Row(const float* values, int64_t n, int8_t* quants, uint16_t* scales) {
  for (int64_t begin = 0, block = 0; begin < n; begin += kQ8BlockSize, ++block) {
    const int64_t end = std::min<int64_t>(n, begin + kQ8BlockSize);
    float max_abs = 0;
    for (int64_t k = begin; k < end; ++k) max_abs = std::max(max_abs, std::fabs(values[k]));
    scales[block] = FloatToHalf(max_abs / 127.0f);
    const float scale = HalfToFloat(scales[block]);
    for (int64_t k = begin; k < end; ++k) {
      const float q = scale == 0 || std::isnan(values[k]) ? 0.0f : std::round(values[k] / scale);
      quants[k] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
  }
}

void DequantizeQ8Row(const int8_t* quants, const uint16_t* scales, int64_t n, float* out) {
  for (int64_t k = 0; k < n; ++k) {
    out[k] = float(quants[k]) * HalfToFloat(scales[k / kQ8BlockSize]);
  }
}

}  // namespace tandem
