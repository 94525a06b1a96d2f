#include "model/safetensors_writer.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/float16.h"

namespace tandem {

std::string SafetensorsHeaderText(const std::vector<SafetensorsTensorEntry>& entries,
                                  const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsTensorEntry& entry : entries) {
    header[entry.name] = {{"dtype", SafetensorsDTypeName(entry.dtype)},
                          {"shape", entry.shape},
                          {"data_offsets", {offset, offset + entry.bytes}}};
    offset += entry.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

absl::StatusOr<SafetensorsFileWriter> SafetensorsFileWriter::Create(
    const std::string& path, std::vector<SafetensorsTensorEntry> entries,
    const std::map<std::string, std::string>& metadata) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return absl::InternalError(absl::StrCat(path, ": cannot create"));
  SafetensorsFileWriter writer(path, std::move(entries), file);
  const std::string prefix =
      AssembleSafetensors(SafetensorsHeaderText(writer.entries_, metadata), "");
  if (std::fwrite(prefix.data(), 1, prefix.size(), file) != prefix.size()) {
    return absl::InternalError(absl::StrCat(path, ": cannot write"));
  }
  return writer;
}

SafetensorsFileWriter::SafetensorsFileWriter(std::string path,
                                             std::vector<SafetensorsTensorEntry> entries,
                                             FILE* file)
    : path_(std::move(path)), entries_(std::move(entries)), file_(file, &std::fclose) {}

absl::Status SafetensorsFileWriter::Append(absl::string_view bytes) {
  if (next_ >= entries_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": all ", entries_.size(), " tensors are already written"));
  }
  const SafetensorsTensorEntry& entry = entries_[next_];
  if (bytes.size() != entry.bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor \"", entry.name, "\" is ",
                                                   entry.bytes, " bytes, got ", bytes.size()));
  }
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_.get()) != bytes.size()) {
    return absl::InternalError(absl::StrCat(path_, ": cannot write"));
  }
  ++next_;
  return absl::OkStatus();
}

absl::Status SafetensorsFileWriter::Finish() {
  if (next_ != entries_.size()) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": ", entries_.size() - next_, " of ",
                                                      entries_.size(), " tensors not written"));
  }
  if (file_ == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(path_, ": already closed"));
  FILE* file = file_.release();
  if (std::fflush(file) != 0 || std::ferror(file) != 0) {
    std::fclose(file);
    return absl::InternalError(absl::StrCat(path_, ": cannot write"));
  }
  if (std::fclose(file) != 0) return absl::InternalError(absl::StrCat(path_, ": cannot close"));
  return absl::OkStatus();
}

std::string SerializeSafetensors(const std::vector<SafetensorsTensorData>& tensors,
                                 const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsTensorEntry> entries;
  std::string data;
  for (const SafetensorsTensorData& tensor : tensors) {
    entries.push_back({tensor.name, tensor.dtype, tensor.shape, tensor.bytes.size()});
    data += tensor.bytes;
  }
  return AssembleSafetensors(SafetensorsHeaderText(entries, metadata), data);
}

std::string AssembleSafetensors(absl::string_view header_json, absl::string_view data) {
  std::string file(8, '\0');
  uint64_t length = header_json.size();
  for (int i = 0; i < 8; ++i) {
    file[i] = static_cast<char>(length & 0xFF);
    length >>= 8;
  }
  absl::StrAppend(&file, header_json, data);
  return file;
}

std::string FloatBytes(const std::vector<float>& values, SafetensorsDType dtype) {
  std::string bytes;
  for (float value : values) {
    char element[4];
    size_t size = 4;
    if (dtype == SafetensorsDType::kF32) {
      std::memcpy(element, &value, 4);
    } else if (dtype == SafetensorsDType::kF16 || dtype == SafetensorsDType::kBF16) {
      const uint16_t bits =
          dtype == SafetensorsDType::kF16 ? FloatToHalf(value) : FloatToBFloat16(value);
      std::memcpy(element, &bits, 2);
      size = 2;
    } else {
      return std::string();  // Not a floating-point dtype.
    }
    bytes.append(element, size);
  }
  return bytes;
}

absl::Status WriteBinaryFile(const std::string& path, absl::string_view bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

}  // namespace tandem
