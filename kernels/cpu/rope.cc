#include "kernels/cpu/rope.h"

#include <cmath>
#include <cstddef>

namespace tandem {
namespace cpu {

RopeTable BuildRopeTable(const int32_t* positions, int rows, const float* inv_freq, int half) {
  RopeTable table;
  table.rows = rows;
  table.half = half;
  table.inv_freq.assign(inv_freq, inv_freq + half);
  table.cos.resize(size_t(rows) * half);
  table.sin.resize(size_t(rows) * half);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < half; ++j) {
      const float angle = float(positions[r]) * inv_freq[j];
      table.cos[size_t(r) * half + j] = float(std::cos(double(angle)));
      table.sin[size_t(r) * half + j] = float(std::sin(double(angle)));
    }
  }
  return table;
}

void ApplyRope(const RopeTable& table, float* x, int num_heads, int head_dim) {
  const int half = table.half;
  for (int r = 0; r < table.rows; ++r) {
    const float* c = table.cos.data() + size_t(r) * half;
    const float* s = table.sin.data() + size_t(r) * half;
    for (int h = 0; h < num_heads; ++h) {
      float* x1 = x + (size_t(r) * num_heads + h) * head_dim;
      float* x2 = x1 + half;
      for (int j = 0; j < half; ++j) {
        const float a = x1[j], b = x2[j];
        x1[j] = a * c[j] - b * s[j];
        x2[j] = b * c[j] + a * s[j];
      }
    }
  }
}

}  // namespace cpu
}  // namespace tandem
