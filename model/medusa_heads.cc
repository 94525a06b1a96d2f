#include "model/medusa_heads.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/json_field_reader.h"
#include "model/safetensors.h"

namespace tandem {
namespace {

std::string PathString(const std::vector<int>& path) {
  return absl::StrCat("[", absl::StrJoin(path, ","), "]");
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad()) return absl::InvalidArgumentError(absl::StrCat(path, ": read error"));
  return text.str();
}

absl::StatusOr<std::vector<std::vector<int>>> ParseChoices(const JsonFieldReader& reader,
                                                           int num_heads) {
  if (!reader.Has("medusa_choices")) return DefaultMedusaChoices(num_heads);
  const nlohmann::json& list = reader.object()["medusa_choices"];
  if (!list.is_array()) return reader.Error("medusa_choices", "must be a list of lists");
  std::vector<std::vector<int>> choices;
  for (const nlohmann::json& entry : list) {
    if (!entry.is_array()) return reader.Error("medusa_choices", "must be a list of lists");
    std::vector<int> path;
    for (const nlohmann::json& rank : entry) {
      int value = 0;
      TANDEM_RETURN_IF_ERROR(
          reader.IntValue(rank, "medusa_choices", 0, kMaxMedusaRank - 1, &value));
      path.push_back(value);
    }
    choices.push_back(std::move(path));
  }
  TANDEM_RETURN_IF_ERROR(ValidateMedusaChoices(choices, num_heads, reader.source()));
  return choices;
}

absl::StatusOr<MedusaConfig> ReadMedusaConfig(const std::string& model_dir) {
  const std::string path = absl::StrCat(model_dir, "/config.json");
  absl::StatusOr<std::string> text = ReadText(path);
  if (!text.ok()) return text.status();
  nlohmann::json object = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!object.is_object())
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  JsonFieldReader reader(object, path);
  MedusaConfig config;
  for (const char* key : {"medusa_num_heads", "medusa_num_layers"}) {
    if (!reader.Has(key)) {
      return reader.Error(key, absl::StrCat("is missing (required with ", kMedusaHeadsFile, ")"));
    }
  }
  TANDEM_RETURN_IF_ERROR(reader.Int("medusa_num_heads", 1, 16, nullptr, &config.num_heads));
  TANDEM_RETURN_IF_ERROR(reader.Int("medusa_num_layers", 0, 8, nullptr, &config.num_layers));
  absl::StatusOr<std::vector<std::vector<int>>> choices = ParseChoices(reader, config.num_heads);
  if (!choices.ok()) return choices.status();
  config.choices = *std::move(choices);
  return config;
}

absl::StatusOr<HostTensor> LoadTensor(const SafetensorsFile& file, const std::string& name,
                                      std::vector<int64_t> shape) {
  absl::StatusOr<SafetensorsTensorView> view = file.Find(name);
  if (!view.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path(), ": tensor \"", name, "\" is missing"));
  }
  return WholeTensor(*std::move(view), absl::StrCat(file.path(), ": tensor \"", name, "\""), shape);
}

absl::StatusOr<MedusaHostHead> LoadHead(const SafetensorsFile& file, int head,
                                        const MedusaConfig& config, int64_t hidden, int64_t vocab) {
  MedusaHostHead out;
  for (int j = 0; j < config.num_layers; ++j) {
    const std::string prefix = absl::StrCat(head, ".", j, ".linear.");
    absl::StatusOr<HostTensor> w = LoadTensor(file, prefix + "weight", {hidden, hidden});
    if (!w.ok()) return w.status();
    absl::StatusOr<HostTensor> b = LoadTensor(file, prefix + "bias", {hidden});
    if (!b.ok()) return b.status();
    out.weights.push_back(*std::move(w));
    out.biases.push_back(*std::move(b));
  }
  absl::StatusOr<HostTensor> lm =
      LoadTensor(file, absl::StrCat(head, ".", config.num_layers, ".weight"), {vocab, hidden});
  if (!lm.ok()) return lm.status();
  out.lm_head = *std::move(lm);
  return out;
}

}  // namespace

int MedusaConfig::TopK(int nodes) const {
  const size_t n = nodes < 0 ? choices.size() : std::min<size_t>(nodes, choices.size());
  int k = 0;
  for (size_t i = 0; i < n; ++i) {
    for (int rank : choices[i]) k = std::max(k, rank + 1);
  }
  return k;
}

int MedusaConfig::Depth(int nodes) const {
  const size_t n = nodes < 0 ? choices.size() : std::min<size_t>(nodes, choices.size());
  int depth = 0;
  for (size_t i = 0; i < n; ++i) depth = std::max(depth, static_cast<int>(choices[i].size()));
  return depth;
}

std::vector<std::vector<int>> DefaultMedusaChoices(int num_heads) {
  // Likelihood order of a typical head (rank r at depth d ~ a_d (1 - a_d)^r).
  static const std::vector<std::vector<int>> kGeneric = {
      {0},    {1},    {0, 0},    {2},       {0, 1},       {1, 0},    {0, 0, 0}, {3},
      {0, 2}, {2, 0}, {1, 1},    {0, 0, 1}, {0, 1, 0},    {1, 0, 0}, {4},       {0, 0, 0, 0},
      {0, 3}, {3, 0}, {0, 0, 2}, {0, 2, 0}, {0, 0, 0, 1}, {2, 1},    {1, 2},    {5}};
  std::vector<std::vector<int>> choices;
  for (const std::vector<int>& path : kGeneric) {
    if (static_cast<int>(path.size()) <= num_heads) choices.push_back(path);
  }
  return choices;
}

absl::Status ValidateMedusaChoices(const std::vector<std::vector<int>>& choices, int num_heads,
                                   const std::string& source) {
  std::set<std::vector<int>> seen;
  for (const std::vector<int>& path : choices) {
    const auto bad = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": medusa_choices path ", PathString(path), " ", what));
    };
    if (path.empty() || static_cast<int>(path.size()) > num_heads) {
      return bad(absl::StrCat("must have 1 to medusa_num_heads (", num_heads, ") entries"));
    }
    for (int rank : path) {
      if (rank < 0 || rank >= kMaxMedusaRank) {
        return bad(absl::StrCat("has a rank outside [0, ", kMaxMedusaRank, ")"));
      }
    }
    if (seen.count(path) > 0) return bad("is listed twice");
    if (path.size() > 1 && seen.count(std::vector<int>(path.begin(), path.end() - 1)) == 0) {
      return bad("comes before its parent path");
    }
    seen.insert(path);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<MedusaHostWeights>> LoadMedusaHeads(const std::string& model_dir,
                                                                 const LlamaConfig& base) {
  const std::string path = absl::StrCat(model_dir, "/", kMedusaHeadsFile);
  if (access(path.c_str(), F_OK) != 0) return std::optional<MedusaHostWeights>();
  absl::StatusOr<MedusaConfig> config = ReadMedusaConfig(model_dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file = SafetensorsFile::Open(path);
  if (!file.ok()) return absl::InvalidArgumentError(file.status().message());
  MedusaHostWeights weights;
  weights.config = *std::move(config);
  weights.hidden_size = base.hidden_size;
  weights.vocab_size = base.vocab_size;
  const MedusaConfig& c = weights.config;
  for (int i = 0; i < c.num_heads; ++i) {
    absl::StatusOr<MedusaHostHead> head = LoadHead(**file, i, c, base.hidden_size, base.vocab_size);
    if (!head.ok()) return head.status();
    weights.heads.push_back(*std::move(head));
  }
  const size_t expected = static_cast<size_t>(c.num_heads) * (2 * c.num_layers + 1);
  if ((*file)->header().tensors.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": holds ", (*file)->header().tensors.size(), " tensors, expected ", expected,
        " for medusa_num_heads=", c.num_heads, " and medusa_num_layers=", c.num_layers));
  }
  return std::optional<MedusaHostWeights>(std::move(weights));
}

absl::StatusOr<std::unique_ptr<MedusaHeads>> MedusaHeads::Create(const MedusaHostWeights& w,
                                                                 Backend* backend) {
  std::unique_ptr<MedusaHeads> heads(
      new MedusaHeads(backend, w.config, w.hidden_size, w.vocab_size));
  const auto upload = [&](const HostTensor& t) {
    return backend->UploadWeight(t.data, t.dtype, t.rows, t.cols, t.owner);
  };
  const size_t row_bytes = sizeof(float) * w.hidden_size;
  for (const MedusaHostHead& host : w.heads) {
    Head head;
    for (size_t j = 0; j < host.weights.size(); ++j) {
      absl::StatusOr<Weight> weight = upload(host.weights[j]);
      if (!weight.ok()) return weight.status();
      head.weights.push_back(*std::move(weight));
      std::vector<float> bias(w.hidden_size);
      for (int k = 0; k < w.hidden_size; ++k) bias[k] = host.biases[j].At(0, k);
      absl::StatusOr<Buffer> buffer = backend->Allocate(row_bytes);
      if (!buffer.ok()) return buffer.status();
      TANDEM_RETURN_IF_ERROR(backend->CopyToDevice(bias.data(), buffer->data(), row_bytes));
      head.biases.push_back(*std::move(buffer));
    }
    absl::StatusOr<Weight> lm = upload(host.lm_head);
    if (!lm.ok()) return lm.status();
    head.lm_head = *std::move(lm);
    heads->heads_.push_back(std::move(head));
  }
  for (Buffer* b : {&heads->x_, &heads->t_, &heads->act_, &heads->ones_}) {
    absl::StatusOr<Buffer> buffer = backend->Allocate(row_bytes);
    if (!buffer.ok()) return buffer.status();
    *b = *std::move(buffer);
  }
  const std::vector<float> ones(w.hidden_size, 1.0f);
  TANDEM_RETURN_IF_ERROR(backend->CopyToDevice(ones.data(), heads->ones_.data(), row_bytes));
  absl::StatusOr<Buffer> logits =
      backend->Allocate(sizeof(float) * w.vocab_size * std::max(1, w.config.num_heads));
  if (!logits.ok()) return logits.status();
  heads->logits_ = *std::move(logits);
  return heads;
}

absl::Status MedusaHeads::Forward(const float* hidden_row, std::vector<float>* logits, int heads) {
  const size_t row_bytes = sizeof(float) * hidden_;
  const size_t n = heads < 0 ? heads_.size() : std::min<size_t>(heads, heads_.size());
  for (size_t i = 0; i < n; ++i) {
    const Head& head = heads_[i];
    TANDEM_RETURN_IF_ERROR(backend_->CopyOnDevice(hidden_row, x_.data(), row_bytes));
    for (size_t j = 0; j < head.weights.size(); ++j) {
      backend_->MatMul(x_.f32(), 1, head.weights[j], t_.f32());
      backend_->Add(t_.f32(), head.biases[j].f32(), hidden_);
      backend_->SiluMul(t_.f32(), ones_.f32(), hidden_, act_.f32());  // SiLU(t) * 1.
      backend_->Add(x_.f32(), act_.f32(), hidden_);
    }
    backend_->MatMul(x_.f32(), 1, head.lm_head, logits_.f32() + i * vocab_);
  }
  logits->resize(n * vocab_);
  return backend_->CopyToHost(logits_.data(), logits->data(), logits->size() * sizeof(float));
}

}  // namespace tandem
