// Rotary position embedding, Hugging Face rotate_half convention.
#ifndef TANDEM_KERNELS_CPU_ROPE_H_
#define TANDEM_KERNELS_CPU_ROPE_H_

#include <cstdint>
#include <vector>

namespace tandem {
namespace cpu {

// cos/sin of every (row, frequency) pair: [rows, half] each, half = head_dim / 2.
struct RopeTable {
  int rows = 0;
  int half = 0;
  std::vector<float> inv_freq;  // [half], the frequencies the table was built from.
  std::vector<float> cos;
  std::vector<float> sin;
};

// angle = float(positions[r]) * inv_freq[j] in float32 (as Hugging Face computes it);
// cos and sin are evaluated in double and rounded to float.
RopeTable BuildRopeTable(const int32_t* positions, int rows, const float* inv_freq, int half);

// In place on x: [rows, num_heads * head_dim], for each head the pairs (j, j + half):
//   x1' = x1 cos - x2 sin;  x2' = x2 cos + x1 sin.
// head_dim must be even and equal 2 * table.half; rows must be table.rows.
void ApplyRope(const RopeTable& table, float* x, int num_heads, int head_dim);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_ROPE_H_
