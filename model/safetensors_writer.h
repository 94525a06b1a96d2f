// Writer for the safetensors format (see safetensors.h), used by tests and tools to
// produce checkpoints with known contents.
#ifndef TANDEM_MODEL_SAFETENSORS_WRITER_H_
#define TANDEM_MODEL_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "model/safetensors.h"

namespace tandem {

// One tensor to write: `bytes` holds numel * dtype-size bytes, row-major, little-endian.
struct SafetensorsTensorData {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A complete file: tensors stored back to back in the given order, header padded
// with spaces to a multiple of 8 bytes (as the reference writer does).
std::string SerializeSafetensors(const std::vector<SafetensorsTensorData>& tensors,
                                 const std::map<std::string, std::string>& metadata = {});

// Raw file from an arbitrary header text and data buffer (for malformed test files):
// 8-byte little-endian length of `header_json`, the header, then `data`.
std::string AssembleSafetensors(absl::string_view header_json, absl::string_view data);

// `values` encoded as F32, F16 or BF16 (round to nearest even); empty for other dtypes.
std::string FloatBytes(const std::vector<float>& values, SafetensorsDType dtype);

// Writes `bytes` to `path` (replacing it).
absl::Status WriteBinaryFile(const std::string& path, absl::string_view bytes);

}  // namespace tandem

#endif  // TANDEM_MODEL_SAFETENSORS_WRITER_H_
