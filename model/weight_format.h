// Converting loaded Llama weights to another weight format in memory (for benchmarks of
// every format on one checkpoint, and for tests): the linear-layer matrices are
// rewritten, the embedding and norms kept as they are.
#ifndef TANDEM_MODEL_WEIGHT_FORMAT_H_
#define TANDEM_MODEL_WEIGHT_FORMAT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "model/weights.h"

namespace tandem {

// "f32", "f16", "bf16", "q8_0" or "q4_0" (DTypeName's spelling); INVALID_ARGUMENT otherwise.
absl::StatusOr<DType> ParseWeightFormat(const std::string& name);

// A copy of `weights` whose linear matrices (q/k/v/o, gate/up/down of every layer, and
// lm_head) are in `format`, each in its own owned buffer (so layers that shared a
// buffer no longer do): f32/f16/bf16 by rounding to nearest even from the float value
// (HostTensor::At), q8_0 by QuantizeQ8Row, q4_0 by QuantizeQ4Row. The embedding, norms and the rest
// are shared with `weights`. RESOURCE_EXHAUSTED when memory runs out.
absl::StatusOr<LlamaWeights> ConvertLinearWeights(const LlamaWeights& weights, DType format);

// Bytes of the linear matrices (q8_0/q4_0: quants plus scales) plus the embedding and norms,
// as stored: what a decode step streams, and what the model keeps resident.
int64_t WeightBytes(const LlamaWeights& weights);

}  // namespace tandem

#endif  // TANDEM_MODEL_WEIGHT_FORMAT_H_
