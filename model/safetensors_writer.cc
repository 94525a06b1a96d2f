#include "model/safetensors_writer.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "model/float16.h"

namespace tandem {

std::string SerializeSafetensors(const std::vector<SafetensorsTensorData>& tensors,
                                 const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::string data;
  for (const SafetensorsTensorData& tensor : tensors) {
    header[tensor.name] = {{"dtype", SafetensorsDTypeName(tensor.dtype)},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + tensor.bytes.size()}}};
    offset += tensor.bytes.size();
    data += tensor.bytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  return AssembleSafetensors(header_text, data);
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
