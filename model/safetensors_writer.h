// Writer for the safetensors format (see safetensors.h), used by tests and tools to
// produce checkpoints with known contents: whole files in memory, or streamed one
// tensor at a time (SafetensorsFileWriter).
#ifndef TANDEM_MODEL_SAFETENSORS_WRITER_H_
#define TANDEM_MODEL_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// A tensor's header entry, its `bytes` (numel * dtype size) written separately.
struct SafetensorsTensorEntry {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
};

// The JSON header of a file holding `entries` back to back in the given order, padded
// with spaces to a multiple of 8 bytes (as the reference writer does).
std::string SafetensorsHeaderText(const std::vector<SafetensorsTensorEntry>& entries,
                                  const std::map<std::string, std::string>& metadata = {});

// Writes a safetensors file one tensor at a time, so that a checkpoint larger than
// memory can be written from one tensor's buffer: Create writes the header, each Append
// the bytes of the next entry in order, Finish checks that all were written and closes.
class SafetensorsFileWriter {
 public:
  // Creates (replaces) `path` and writes the header of `entries`. INTERNAL when the
  // file cannot be created or written.
  static absl::StatusOr<SafetensorsFileWriter> Create(
      const std::string& path, std::vector<SafetensorsTensorEntry> entries,
      const std::map<std::string, std::string>& metadata = {});

  // Writes the next entry's bytes. INVALID_ARGUMENT when `bytes` is not that entry's
  // size or every entry is already written; INTERNAL on a write failure.
  absl::Status Append(absl::string_view bytes);

  // Flushes and closes the file. FAILED_PRECONDITION when entries are left unwritten
  // (the file stays open and incomplete) or it is already closed; INTERNAL on a write
  // failure.
  absl::Status Finish();

 private:
  SafetensorsFileWriter(std::string path, std::vector<SafetensorsTensorEntry> entries, FILE* file);

  std::string path_;
  std::vector<SafetensorsTensorEntry> entries_;
  size_t next_ = 0;  // Index of the entry the next Append writes.
  std::unique_ptr<FILE, int (*)(FILE*)> file_;
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
