// Sampling where the logits are, on the GPU (kernels/accept/accept_algorithm.h, one
// block of 256 threads per item): the verify acceptance (accept::AcceptSequence per
// chain or tree: accept_algorithm.h, tree_accept_algorithm.h; writing only the committed
// tokens, their log-probabilities, a tree's accepted path and a status) and the
// draft proposals (accept::SampleDraftRow per row, writing the token and its sparse q).
// The same algorithms run on the host with accept::HostBlock, which the tests compare
// these kernels with.
//
// Run on an H200 by the GPU tests (tools/gpu_check.sh).
#ifndef TANDEM_KERNELS_CUDA_ACCEPT_KERNELS_H_
#define TANDEM_KERNELS_CUDA_ACCEPT_KERNELS_H_

#include <cuda_runtime_api.h>

#include "kernels/accept/packed_types.h"

namespace tandem::cuda {

// Threads per block of the acceptance kernel (accept::HostBlock::kThreads matches).
constexpr int kAcceptThreads = 256;

// Enqueues the acceptance of every chain or tree of `view` on `stream`. Every pointer of
// `view` is device memory (probs, weights and, when a tree runs the rejection rule,
// residual sized [num_chains, vocab]; node_values one per proposal). cudaErrorInvalidValue
// for a malformed view (null pointers, vocab <= 0, parts not dividing vocab); a batch
// without chains launches nothing.
cudaError_t LaunchVerifyAccept(const accept::BatchView& view, cudaStream_t stream);

// Enqueues the sampling of every draft row of `view` on `stream` (device pointers,
// workspaces [num_drafts, vocab]). cudaErrorInvalidValue for a malformed view; no rows
// launch nothing.
cudaError_t LaunchSampleDrafts(const accept::DraftView& view, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_ACCEPT_KERNELS_H_
