#include "comm/rank_order_sum.h"

#include <algorithm>
#include <vector>

namespace tandem {

void SumInRankOrder(const float* const* blocks, int num_ranks, size_t count, float* out) {
  if (num_ranks <= 0 || count == 0) return;
  // Tiles keep the running sums in cache; within a tile each element is reduced
  // strictly in rank order (the loop over e vectorises without reordering any sum).
  constexpr size_t kTile = 1024;
  float acc[kTile];
  for (size_t begin = 0; begin < count; begin += kTile) {
    const size_t n = std::min(kTile, count - begin);
    const float* first = blocks[0] + begin;
    for (size_t e = 0; e < n; ++e) acc[e] = first[e];
    for (int r = 1; r < num_ranks; ++r) {
      const float* block = blocks[r] + begin;
      for (size_t e = 0; e < n; ++e) acc[e] += block[e];
    }
    std::copy(acc, acc + n, out + begin);
  }
}

void SumInRankOrder(const float* gathered, int num_ranks, size_t count, float* out) {
  if (num_ranks <= 0) return;
  constexpr int kOnStack = 64;
  const float* on_stack[kOnStack];
  std::vector<const float*> on_heap;
  const float** blocks = on_stack;
  if (num_ranks > kOnStack) {
    on_heap.resize(static_cast<size_t>(num_ranks));
    blocks = on_heap.data();
  }
  for (int r = 0; r < num_ranks; ++r) blocks[r] = gathered + static_cast<size_t>(r) * count;
  SumInRankOrder(blocks, num_ranks, count, out);
}

}  // namespace tandem
