#include "model/checkpoint.h"

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem {
namespace {

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

bool FileExists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

// A shard name must stay inside the model directory.
bool IsSafeRelativePath(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

// Parses the index into tensor name -> shard file name.
absl::StatusOr<std::map<std::string, std::string>> ReadIndex(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::json root =
      nlohmann::json::parse(text.str(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  }
  if (!root.is_object() || !root.contains("weight_map") || !root["weight_map"].is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected an object with a \"weight_map\" object"));
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, shard] : root["weight_map"].items()) {
    if (!shard.is_string() || !IsSafeRelativePath(shard.get<std::string>())) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": weight_map entry \"", tensor,
                       "\" must name a shard file inside the model directory, got ",
                       shard.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    }
    weight_map[tensor] = shard.get<std::string>();
  }
  if (weight_map.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": weight_map is empty"));
  }
  return weight_map;
}

}  // namespace

absl::StatusOr<Checkpoint> Checkpoint::Open(const std::string& model_dir) {
  Checkpoint checkpoint;
  checkpoint.dir_ = model_dir;
  const std::string single_path = absl::StrCat(model_dir, "/", kSingleFile);
  const std::string index_path = absl::StrCat(model_dir, "/", kIndexFile);
  if (FileExists(single_path)) {
    auto file = SafetensorsFile::Open(single_path);
    if (!file.ok()) return file.status();
    for (const auto& entry : (*file)->header().tensors) {
      checkpoint.tensor_to_file_[entry.first] = file->get();
    }
    checkpoint.files_.push_back(*std::move(file));
    return checkpoint;
  }
  if (!FileExists(index_path)) {
    return absl::NotFoundError(
        absl::StrCat(model_dir, ": neither ", kSingleFile, " nor ", kIndexFile, " exists"));
  }
  auto weight_map = ReadIndex(index_path);
  if (!weight_map.ok()) return weight_map.status();
  std::map<std::string, const SafetensorsFile*> shards;  // Each opened once.
  for (const auto& [tensor, shard_name] : *weight_map) {
    auto it = shards.find(shard_name);
    if (it == shards.end()) {
      const std::string shard_path = absl::StrCat(model_dir, "/", shard_name);
      if (!FileExists(shard_path)) {
        return absl::NotFoundError(absl::StrCat(index_path, ": shard \"", shard_name,
                                                "\" (for tensor \"", tensor, "\") does not exist"));
      }
      auto file = SafetensorsFile::Open(shard_path);
      if (!file.ok()) return file.status();
      it = shards.emplace(shard_name, file->get()).first;
      checkpoint.files_.push_back(*std::move(file));
    }
    if (!it->second->Contains(tensor)) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": tensor \"", tensor,
                                                     "\" is assigned to shard \"", shard_name,
                                                     "\", which lacks it"));
    }
    checkpoint.tensor_to_file_[tensor] = it->second;
  }
  return checkpoint;
}

std::vector<std::string> Checkpoint::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensor_to_file_.size());
  for (const auto& entry : tensor_to_file_) names.push_back(entry.first);
  return names;
}

bool Checkpoint::Contains(absl::string_view name) const {
  return tensor_to_file_.find(name) != tensor_to_file_.end();
}

std::string Checkpoint::FileOf(absl::string_view name) const {
  auto it = tensor_to_file_.find(name);
  return it == tensor_to_file_.end() ? std::string() : it->second->path();
}

absl::StatusOr<SafetensorsTensorView> Checkpoint::Find(absl::string_view name) const {
  auto it = tensor_to_file_.find(name);
  if (it == tensor_to_file_.end()) {
    return absl::NotFoundError(absl::StrCat(dir_, ": checkpoint has no tensor \"", name, "\""));
  }
  return it->second->Find(name);
}

}  // namespace tandem
