// The deterministic reduction shared by the CPU backends: after an all-gather, every
// rank sums the gathered buffers in rank order, so element e of the result is always
// ((x0[e] + x1[e]) + x2[e]) + ... in float, whatever the message size or chunking.
#ifndef TANDEM_COMM_RANK_ORDER_SUM_H_
#define TANDEM_COMM_RANK_ORDER_SUM_H_

#include <cstddef>

namespace tandem {

// gathered: `num_ranks` consecutive blocks of `count` floats (rank r's block at
// gathered + r * count). Writes the rank-order sum to out[0..count). `out` may alias
// any block or none.
void SumInRankOrder(const float* gathered, int num_ranks, size_t count, float* out);

// Same over separate blocks: blocks[r] points at rank r's `count` floats.
void SumInRankOrder(const float* const* blocks, int num_ranks, size_t count, float* out);

}  // namespace tandem

#endif  // TANDEM_COMM_RANK_ORDER_SUM_H_
