// GPU version of the rank-order sum (see rank_order_sum.h): element e of `out` is
// ((g[0][e] + g[1][e]) + g[2][e]) + ... with round-to-nearest float adds, bit-identical
// to SumInRankOrder on the CPU.
#ifndef TANDEM_COMM_RANK_ORDER_SUM_CUDA_H_
#define TANDEM_COMM_RANK_ORDER_SUM_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace tandem::cuda {

// gathered: device memory, `num_ranks` consecutive blocks of `count` floats; out: device
// memory for `count` floats (may alias block 0, must not alias a later block). Enqueues
// on `stream`; returns the launch error, if any.
cudaError_t LaunchSumInRankOrder(const float* gathered, int num_ranks, size_t count, float* out,
                                 cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_COMM_RANK_ORDER_SUM_CUDA_H_
