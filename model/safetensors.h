// Reader for the safetensors checkpoint format.
//
// File layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
//   {"<tensor name>": {"dtype": "F16", "shape": [rows, cols], "data_offsets": [b, e]},
//    ..., "__metadata__": {"<key>": "<value>", ...}}
// then the data buffer. Tensor bytes [b, e) are relative to the start of the buffer
// (file offset 8 + N), stored row-major, little-endian.
#ifndef TANDEM_MODEL_SAFETENSORS_H_
#define TANDEM_MODEL_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {

enum class SafetensorsDType {
  kBool,
  kU8,
  kI8,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kI64,
  kU64,
  kF64
};

// Bytes per element of `dtype`.
int SafetensorsDTypeSize(SafetensorsDType dtype);
// The format's spelling ("F16", "BF16", ...).
const char* SafetensorsDTypeName(SafetensorsDType dtype);

struct SafetensorsTensorInfo {
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<int64_t> shape;  // Empty for a scalar.
  uint64_t begin = 0;          // Byte range in the data buffer, end - begin =
  uint64_t end = 0;            // numel * dtype size.

  int64_t numel() const;
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;  // File offset of the data buffer (8 + N).
  std::map<std::string, SafetensorsTensorInfo> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__", if any.
};

// Largest accepted JSON header (bytes).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Parses and validates the header of a safetensors file of `file_size` bytes, whose
// first bytes are `file_prefix` (at least 8 + N bytes, or the whole file). Checks:
// length prefix present and within the file and kMaxSafetensorsHeaderBytes; JSON
// object of objects; known dtype; non-negative integer shape without overflow;
// data_offsets inside the buffer, begin <= end, end - begin = numel * dtype size;
// no two tensors overlap; metadata maps strings to strings. Never reads beyond
// `file_prefix`. Errors are INVALID_ARGUMENT naming `file_name` (and the tensor).
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view file_prefix,
                                                         uint64_t file_size,
                                                         const std::string& file_name);

// A tensor inside a mapped file: `data` points at its first byte (no alignment
// guarantee beyond what the file provides) and stays valid while `owner` lives.
struct SafetensorsTensorView {
  std::string name;
  const void* data = nullptr;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<int64_t> shape;
  uint64_t size_bytes = 0;
  std::shared_ptr<const void> owner;  // The file mapping.
};

// A safetensors file mapped read-only into memory. Immutable and thread-compatible;
// the mapping is released when the last SafetensorsFile or view owner goes away.
class SafetensorsFile {
 public:
  // Maps and validates the file. NOT_FOUND when it cannot be opened,
  // INVALID_ARGUMENT when it is not a valid safetensors file.
  static absl::StatusOr<std::shared_ptr<const SafetensorsFile>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  // Tensor names in sorted order.
  std::vector<std::string> TensorNames() const;
  bool Contains(absl::string_view name) const;
  // The named tensor, or NOT_FOUND naming the file and tensor.
  absl::StatusOr<SafetensorsTensorView> Find(absl::string_view name) const;
  // Keeps the mapping alive (usable as HostTensor::owner).
  const std::shared_ptr<const void>& owner() const { return mapping_; }

 private:
  SafetensorsFile(std::string path, SafetensorsHeader header, std::shared_ptr<const void> mapping,
                  const uint8_t* bytes)
      : path_(std::move(path)),
        header_(std::move(header)),
        mapping_(std::move(mapping)),
        bytes_(bytes) {}

  std::string path_;
  SafetensorsHeader header_;
  std::shared_ptr<const void> mapping_;
  const uint8_t* bytes_ = nullptr;  // Start of the mapped file.
};

}  // namespace tandem

#endif  // TANDEM_MODEL_SAFETENSORS_H_
