#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

using Json = nlohmann::json;

struct DTypeEntry {
  const char* name;
  SafetensorsDType dtype;
  int size;
};

constexpr DTypeEntry kDTypes[] = {
    {"BOOL", SafetensorsDType::kBool, 1}, {"U8", SafetensorsDType::kU8, 1},
    {"I8", SafetensorsDType::kI8, 1},     {"I16", SafetensorsDType::kI16, 2},
    {"U16", SafetensorsDType::kU16, 2},   {"F16", SafetensorsDType::kF16, 2},
    {"BF16", SafetensorsDType::kBF16, 2}, {"I32", SafetensorsDType::kI32, 4},
    {"U32", SafetensorsDType::kU32, 4},   {"F32", SafetensorsDType::kF32, 4},
    {"I64", SafetensorsDType::kI64, 8},   {"U64", SafetensorsDType::kU64, 8},
    {"F64", SafetensorsDType::kF64, 8},
};

const DTypeEntry* FindDType(SafetensorsDType dtype) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.dtype == dtype) return &entry;
  }
  return nullptr;
}

// Tensor names come from the file: keep messages bounded.
std::string Quote(absl::string_view name) {
  constexpr size_t kMaxShown = 200;
  if (name.size() <= kMaxShown) return absl::StrCat("\"", name, "\"");
  return absl::StrCat("\"", name.substr(0, kMaxShown), "...\" (", name.size(), " bytes)");
}

std::string Shown(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return text;
}

absl::Status TensorError(const std::string& file, absl::string_view tensor,
                         const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": tensor ", Quote(tensor), ": ", what));
}

// A JSON number that is a non-negative integer representable in uint64.
bool AsUnsigned(const Json& value, uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer()) {
    const int64_t signed_value = value.get<int64_t>();
    if (signed_value < 0) return false;
    *out = static_cast<uint64_t>(signed_value);
    return true;
  }
  return false;
}

absl::Status ParseTensorInfo(const std::string& file, const std::string& name, const Json& entry,
                             uint64_t buffer_size, SafetensorsTensorInfo* info) {
  if (!entry.is_object()) {
    return TensorError(file, name, absl::StrCat("expected an object, got ", Shown(entry)));
  }
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return TensorError(file, name, "missing string field \"dtype\"");
  }
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  const DTypeEntry* dtype = nullptr;
  for (const DTypeEntry& candidate : kDTypes) {
    if (dtype_name == candidate.name) dtype = &candidate;
  }
  if (dtype == nullptr) {
    return TensorError(file, name, absl::StrCat("unknown dtype ", Quote(dtype_name)));
  }
  info->dtype = dtype->dtype;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return TensorError(file, name, "missing list field \"shape\"");
  }
  uint64_t numel = 1;
  bool overflow = false, has_zero_dim = false;
  info->shape.clear();
  for (const Json& dim_value : *shape_it) {
    uint64_t dim = 0;
    if (!AsUnsigned(dim_value, &dim) || dim > static_cast<uint64_t>(INT64_MAX)) {
      return TensorError(file, name,
                         absl::StrCat("shape ", Shown(*shape_it),
                                      " has a dimension that is not a "
                                      "non-negative integer"));
    }
    info->shape.push_back(static_cast<int64_t>(dim));
    has_zero_dim = has_zero_dim || dim == 0;
    overflow = overflow || __builtin_mul_overflow(numel, dim, &numel);
  }
  uint64_t expected_bytes = 0;
  overflow = overflow ||
             __builtin_mul_overflow(numel, static_cast<uint64_t>(dtype->size), &expected_bytes);
  if (has_zero_dim) {
    expected_bytes = 0;  // Empty tensor, whatever the other dimensions are.
  } else if (overflow) {
    return TensorError(file, name, absl::StrCat("shape ", Shown(*shape_it), " is too large"));
  }

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !AsUnsigned((*offsets_it)[0], &info->begin) || !AsUnsigned((*offsets_it)[1], &info->end)) {
    return TensorError(file, name, "\"data_offsets\" must be a list of two non-negative integers");
  }
  if (info->end < info->begin) {
    return TensorError(
        file, name,
        absl::StrCat("data_offsets [", info->begin, ", ", info->end, "] end before they begin"));
  }
  if (info->end > buffer_size) {
    return TensorError(
        file, name,
        absl::StrCat("data_offsets [", info->begin, ", ", info->end,
                     "] are beyond the data buffer of ", buffer_size, " bytes (file truncated?)"));
  }
  if (info->end - info->begin != expected_bytes) {
    return TensorError(file, name,
                       absl::StrCat("data_offsets [", info->begin, ", ", info->end, "] hold ",
                                    info->end - info->begin, " bytes but dtype ", dtype->name,
                                    " and shape ", Shown(*shape_it), " need ", expected_bytes));
  }
  return absl::OkStatus();
}

absl::Status ParseMetadata(const std::string& file, const Json& value,
                           std::map<std::string, std::string>* metadata) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": \"__metadata__\" must be an object of strings, got ", Shown(value)));
  }
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": \"__metadata__\" entry ", Quote(key),
                                                     " must be a string, got ", Shown(item)));
    }
    (*metadata)[key] = item.get<std::string>();
  }
  return absl::OkStatus();
}

absl::Status CheckNoOverlap(const std::string& file, const SafetensorsHeader& header) {
  std::vector<std::pair<const std::string*, const SafetensorsTensorInfo*>> by_offset;
  for (const auto& [name, info] : header.tensors) {
    if (info.end > info.begin) by_offset.push_back({&name, &info});  // Skip empty ones.
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto& previous = by_offset[i - 1];
    const auto& current = by_offset[i];
    if (current.second->begin < previous.second->end) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": tensor ", Quote(*current.first), " (bytes [", current.second->begin,
                       ", ", current.second->end, ")) overlaps tensor ", Quote(*previous.first),
                       " (bytes [", previous.second->begin, ", ", previous.second->end, "))"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsHeader> ParseHeaderJson(absl::string_view json_text, uint64_t buffer_size,
                                                  const std::string& file) {
  const Json root = Json::parse(json_text.begin(), json_text.end(), /*cb=*/nullptr,
                                /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": header is not valid JSON (", json_text.size(), " bytes)"));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": header must be a JSON object, got ", Shown(root)));
  }
  SafetensorsHeader header;
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (auto status = ParseMetadata(file, entry, &header.metadata); !status.ok()) {
        return status;
      }
      continue;
    }
    SafetensorsTensorInfo info;
    if (auto status = ParseTensorInfo(file, name, entry, buffer_size, &info); !status.ok()) {
      return status;
    }
    header.tensors.emplace(name, std::move(info));
  }
  if (auto status = CheckNoOverlap(file, header); !status.ok()) return status;
  return header;
}

}  // namespace

int SafetensorsDTypeSize(SafetensorsDType dtype) {
  const DTypeEntry* entry = FindDType(dtype);
  return entry == nullptr ? 0 : entry->size;
}

const char* SafetensorsDTypeName(SafetensorsDType dtype) {
  const DTypeEntry* entry = FindDType(dtype);
  return entry == nullptr ? "?" : entry->name;
}

int64_t SafetensorsTensorInfo::numel() const {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim == 0) return 0;  // Avoids overflow in the product of the other dims.
  }
  for (int64_t dim : shape) count *= dim;
  return count;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view file_prefix,
                                                         uint64_t file_size,
                                                         const std::string& file_name) {
  if (file_size < 8 || file_prefix.size() < 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": file is ", file_size,
                     " bytes, shorter than the 8-byte header length of a safetensors file"));
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) {
    header_size = (header_size << 8) | static_cast<uint8_t>(file_prefix[i]);
  }
  if (header_size > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": header length ", header_size, " exceeds the limit of ",
                     kMaxSafetensorsHeaderBytes, " bytes (not a safetensors file?)"));
  }
  if (header_size > file_size - 8) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": header length ", header_size,
                                                   " reaches beyond the end of the ", file_size,
                                                   "-byte file (truncated?)"));
  }
  if (file_prefix.size() < 8 + header_size) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": only ", file_prefix.size(),
                                                   " bytes were read but the header needs ",
                                                   8 + header_size));
  }
  try {
    auto header =
        ParseHeaderJson(file_prefix.substr(8, header_size), file_size - 8 - header_size, file_name);
    if (header.ok()) header->data_offset = 8 + header_size;
    return header;
  } catch (const std::exception& error) {
    // Every access is type-checked; this only guards against surprises (bad_alloc).
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": cannot parse header: ", error.what()));
  }
}

absl::StatusOr<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const std::string what = absl::StrCat(path, ": cannot open: ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(what) : absl::InvalidArgumentError(what);
  }
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  if (size < 8) {
    ::close(fd);
    return ParseSafetensorsHeader(absl::string_view(), size, path).status();
  }
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_error = errno;
  ::close(fd);  // The mapping stays valid without the descriptor.
  if (address == MAP_FAILED) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot map ", size, " bytes: ", std::strerror(map_error)));
  }
  std::shared_ptr<const void> mapping(
      address, [size](const void* data) { ::munmap(const_cast<void*>(data), size); });
  const auto* bytes = static_cast<const uint8_t*>(address);
  auto header = ParseSafetensorsHeader(
      absl::string_view(reinterpret_cast<const char*>(bytes), size), size, path);
  if (!header.ok()) return header.status();
  return std::shared_ptr<const SafetensorsFile>(
      new SafetensorsFile(path, *std::move(header), std::move(mapping), bytes));
}

std::vector<std::string> SafetensorsFile::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(header_.tensors.size());
  for (const auto& entry : header_.tensors) names.push_back(entry.first);
  return names;
}

bool SafetensorsFile::Contains(absl::string_view name) const {
  return header_.tensors.count(std::string(name)) > 0;
}

absl::StatusOr<SafetensorsTensorView> SafetensorsFile::Find(absl::string_view name) const {
  auto it = header_.tensors.find(std::string(name));
  if (it == header_.tensors.end()) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor named ", Quote(name)));
  }
  const SafetensorsTensorInfo& info = it->second;
  SafetensorsTensorView view;
  view.name = it->first;
  view.data = bytes_ + header_.data_offset + info.begin;
  view.dtype = info.dtype;
  view.shape = info.shape;
  view.size_bytes = info.end - info.begin;
  view.owner = mapping_;
  return view;
}

}  // namespace tandem
