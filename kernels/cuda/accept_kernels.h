// The verify acceptance on the GPU: accept::AcceptChain (kernels/accept/
// accept_algorithm.h) for every chain of a packed batch, one block of 256 threads per
// chain, writing only the committed tokens, their log-probabilities and a status per
// chain. The same algorithm runs on the host with accept::HostBlock, which the tests
// compare this kernel with.
//
// Never executed on a GPU in the environment this was written in.
#ifndef TANDEM_KERNELS_CUDA_ACCEPT_KERNELS_H_
#define TANDEM_KERNELS_CUDA_ACCEPT_KERNELS_H_

#include <cuda_runtime_api.h>

#include "kernels/accept/packed_types.h"

namespace tandem::cuda {

// Threads per block of the acceptance kernel (accept::HostBlock::kThreads matches).
constexpr int kAcceptThreads = 256;

// Enqueues the acceptance of every chain of `view` on `stream`. Every pointer of `view`
// is device memory (workspaces sized [num_chains, vocab]). cudaErrorInvalidValue for a
// malformed view (null pointers, vocab <= 0, parts not dividing vocab); a batch without
// chains launches nothing.
cudaError_t LaunchVerifyAccept(const accept::BatchView& view, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_ACCEPT_KERNELS_H_
