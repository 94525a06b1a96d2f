// Writes a block-quantized copy of a Hugging Face Llama model directory (the
// `tandem quantize` command). The file layout is in docs/architecture.md "Weight
// formats"; model/weights.h loads it.
#ifndef TANDEM_MODEL_QUANTIZE_MODEL_H_
#define TANDEM_MODEL_QUANTIZE_MODEL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace tandem {

struct QuantizeReport {
  int quantized_tensors = 0;  // Matrices written in the block format.
  int kept_tensors = 0;       // Tensors copied as stored (embedding, norms, ...).
  int64_t input_bytes = 0;    // Tensor bytes read.
  int64_t output_bytes = 0;   // Tensor bytes written (quants + scales + kept tensors).
};

// Reads the model in `in_dir` (config.json and model.safetensors or a sharded index)
// and writes `out_dir`/model.safetensors with every linear-layer matrix (2-D tensors
// named "*_proj.weight" and "lm_head.weight") in `format`: q8_0 -- I8 "<name>" [rows,
// cols], quantized by QuantizeQ8Row -- or q4_0 -- U8 "<name>" [rows,
// Q4BytesPerRow(cols)], packed by QuantizeQ4Row -- each with F16 "<name>_scale" [rows,
// Q8BlocksPerRow(cols)]; every other tensor (embedding, norms) as stored; then copies
// every other file of in_dir (config, tokenizer, Medusa heads) except the checkpoint's
// own .safetensors files and index. out_dir is created if missing. Streams one tensor
// at a time. Errors: those of loading the config/checkpoint; INVALID_ARGUMENT when
// `format` is not q8_0 or q4_0, in_dir is already quantized (an I8 or U8 tensor) or
// out_dir is in_dir; INTERNAL on a write failure.
absl::StatusOr<QuantizeReport> QuantizeModelDir(const std::string& in_dir,
                                                const std::string& out_dir,
                                                DType format = DType::kQ8_0);

}  // namespace tandem

#endif  // TANDEM_MODEL_QUANTIZE_MODEL_H_
