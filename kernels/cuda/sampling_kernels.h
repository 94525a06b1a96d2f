// Row-wise softmax with temperature and argmax over logits on the GPU: the device
// half of greedy acceptance (argmax of the target's logits per position) and the
// probabilities the host sampling rules start from. Top-k/top-p processing and the
// acceptance rules themselves stay in the host library (spec/).
//
// Never executed on a GPU in the environment this was written in; the CUDA tests
// check both kernels against host references when a device exists.
#ifndef TANDEM_KERNELS_CUDA_SAMPLING_KERNELS_H_
#define TANDEM_KERNELS_CUDA_SAMPLING_KERNELS_H_

#include <cstdint>

#include <cuda_runtime_api.h>

namespace tandem::cuda {

// probs[r, :] = softmax(logits[r, :] / temperature), float32 [rows, cols] device arrays
// (may alias), temperature > 0. Max subtraction; NaN logits get probability 0; when
// the largest logit is +inf (or -inf) the mass is shared evenly by the entries equal
// to it; a row of only NaN becomes all zeros. One block per row; the sum has a fixed
// order. cudaErrorInvalidValue for bad arguments.
cudaError_t LaunchSoftmax(const float* logits, int rows, int cols, float temperature,
                          float* probs, cudaStream_t stream);

// out[r] = index of the largest logits[r, :], ties to the lowest index, NaN skipped,
// -1 for a row of only NaN (the semantics of spec::Argmax). out: int32 [rows] device.
cudaError_t LaunchArgmax(const float* logits, int rows, int cols, int32_t* out,
                         cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_KERNELS_H_
