#include "model/synthetic_model_dir.h"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "model/safetensors_writer.h"
#include "model/synthetic_weights.h"
#include "model/tokenizer.h"
#include "model/weight_format.h"
#include "model/weights.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// Files of a model directory that belong to its tokenizer and generation defaults.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json",         "tokenizer.model",
                                           "tokenizer_config.json",  "special_tokens_map.json",
                                           "generation_config.json", "chat_template.jinja"};

// The synthetic shape with the vocabulary (and bos/eos ids) options ask for.
absl::StatusOr<SyntheticModel> ChooseModel(const SyntheticModelDirOptions& options) {
  if (absl::StrContains(options.shape, ':')) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic model '", options.shape,
                                                   "': a model directory holds the whole model, ",
                                                   "not a tensor-parallel rank (drop the ':R/N')"));
  }
  if (options.vocab_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary size ", options.vocab_size, " is negative"));
  }
  auto model = ParseSyntheticModel(options.shape);
  if (!model.ok()) return model.status();
  LlamaConfig& config = model->config;
  if (options.vocab_size > 0) config.vocab_size = options.vocab_size;
  if (options.tokenizer_from.empty()) return model;
  auto source = LoadLlamaConfig(options.tokenizer_from);
  if (!source.ok()) return source.status();
  if (options.vocab_size > 0 && options.vocab_size != source->vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocabulary size ", options.vocab_size, " differs from ", options.tokenizer_from,
        "'s vocab_size ", source->vocab_size, " (leave it unset to take that one)"));
  }
  auto tokenizer = Tokenizer::Load(options.tokenizer_from);
  if (!tokenizer.ok()) return tokenizer.status();
  if (tokenizer->vocab_size() > source->vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.tokenizer_from, ": the tokenizer has ", tokenizer->vocab_size(),
                     " tokens, more than its config's vocab_size ", source->vocab_size));
  }
  config.vocab_size = source->vocab_size;
  config.bos_token_id = source->bos_token_id;
  config.eos_token_ids = source->eos_token_ids;
  return model;
}

const char* TorchDtype(DType format) {
  switch (format) {
    case DType::kF32:
      return "float32";
    case DType::kF16:
      return "float16";
    default:
      return "bfloat16";  // bf16, and q8_0 (its embedding and norms are bf16).
  }
}

std::string ConfigJson(const LlamaConfig& c, const SyntheticModelDirOptions& options) {
  nlohmann::ordered_json json = {
      {"architectures", {c.architecture}},
      {"model_type", "llama"},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"num_hidden_layers", c.num_layers},
      {"head_dim", c.head_dim},
      {"hidden_act", "silu"},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"vocab_size", c.vocab_size},
      {"tie_word_embeddings", false},
      {"max_position_embeddings", c.max_position_embeddings},
      {"bos_token_id", c.bos_token_id},
      {"torch_dtype", TorchDtype(options.format)},
      {"tandem_synthetic",
       {{"shape", options.shape},
        {"seed", options.seed},
        {"format", DTypeName(options.format)},
        {"note", "random weights with real shapes for speed and memory runs: NOT A MODEL"}}}};
  if (c.eos_token_ids.size() == 1) {
    json["eos_token_id"] = c.eos_token_ids[0];
  } else {
    json["eos_token_id"] = c.eos_token_ids;
  }
  return json.dump(2) + "\n";
}

absl::Status CheckOutDir(const std::string& out_dir) {
  std::error_code error;
  if (!fs::exists(out_dir, error)) return absl::OkStatus();
  for (const auto& entry : fs::directory_iterator(out_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name == "config.json" || absl::EndsWith(name, ".safetensors")) {
      return absl::InvalidArgumentError(absl::StrCat(out_dir, " already holds a model (", name,
                                                     "); give a new or empty directory"));
    }
  }
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat(out_dir, ": ", error.message()));
  }
  return absl::OkStatus();
}

absl::Status CopyTokenizerFiles(const std::string& from, const std::string& out_dir,
                                std::vector<std::string>* copied) {
  for (const char* name : kTokenizerFiles) {
    const fs::path source = fs::path(from) / name;
    std::error_code error;
    if (!fs::is_regular_file(source, error)) continue;
    fs::copy_file(source, fs::path(out_dir) / name, fs::copy_options::overwrite_existing, error);
    if (error) {
      return absl::InternalError(
          absl::StrCat("cannot copy ", source.string(), " to ", out_dir, ": ", error.message()));
    }
    copied->push_back(name);
  }
  return absl::OkStatus();
}

// Adds the safetensors entries `tensor` is stored as: a linear matrix in `format`
// (q8_0: quants and "_scale"), anything else as generated (bf16; norms 1-D).
// INVALID_ARGUMENT for a format this writer does not know.
absl::Status AddEntries(const SyntheticTensor& tensor, DType format,
                        std::vector<SafetensorsTensorEntry>* entries) {
  const int64_t rows = tensor.rows, cols = tensor.cols;
  if (tensor.kind == SyntheticTensor::Kind::kNorm) {
    entries->push_back({tensor.name, SafetensorsDType::kBF16, {cols}, uint64_t(cols) * 2});
    return absl::OkStatus();
  }
  const DType stored = tensor.kind == SyntheticTensor::Kind::kMatrix ? format : DType::kBF16;
  const uint64_t numel = uint64_t(rows * cols);
  switch (stored) {
    case DType::kF32:
      entries->push_back({tensor.name, SafetensorsDType::kF32, {rows, cols}, numel * 4});
      return absl::OkStatus();
    case DType::kF16:
      entries->push_back({tensor.name, SafetensorsDType::kF16, {rows, cols}, numel * 2});
      return absl::OkStatus();
    case DType::kBF16:
      entries->push_back({tensor.name, SafetensorsDType::kBF16, {rows, cols}, numel * 2});
      return absl::OkStatus();
    case DType::kQ8_0: {
      const int64_t blocks = Q8BlocksPerRow(cols);
      entries->push_back({tensor.name, SafetensorsDType::kI8, {rows, cols}, numel});
      entries->push_back({tensor.name + "_scale",
                          SafetensorsDType::kF16,
                          {rows, blocks},
                          uint64_t(rows * blocks) * 2});
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("weight format ", DTypeName(format), " cannot be written as a model yet"));
}

// `tensor`'s values as stored: generated, and a linear matrix converted to `format` by
// ConvertLinearWeights (the in-memory conversion, applied to this one matrix).
absl::StatusOr<HostTensor> StoredTensor(const SyntheticTensor& tensor, DType format,
                                        uint64_t seed) {
  auto made = MakeSyntheticTensor(tensor, seed);
  if (!made.ok() || tensor.kind != SyntheticTensor::Kind::kMatrix) return made;
  LlamaWeights one_matrix;
  one_matrix.lm_head = *std::move(made);
  auto converted = ConvertLinearWeights(one_matrix, format);
  if (!converted.ok()) return converted.status();
  return converted->lm_head;
}

// The byte ranges of a stored tensor, in the order AddEntries lists them.
std::vector<absl::string_view> StoredParts(const HostTensor& t) {
  const auto* data = static_cast<const char*>(t.data);
  std::vector<absl::string_view> parts = {
      absl::string_view(data, size_t(t.numel()) * DTypeSize(t.dtype))};
  if (t.dtype == DType::kQ8_0) {
    parts.emplace_back(static_cast<const char*>(t.scales),
                       size_t(t.rows * Q8BlocksPerRow(t.cols)) * 2);
  }
  return parts;
}

absl::Status WriteTensors(const SyntheticModel& model, const SyntheticModelDirOptions& options,
                          const std::string& path, SyntheticModelDirReport* report) {
  const std::vector<SyntheticTensor> tensors = SyntheticTensors(model);
  std::vector<SafetensorsTensorEntry> entries;
  for (const SyntheticTensor& t : tensors) {
    if (absl::Status status = AddEntries(t, options.format, &entries); !status.ok()) {
      return status;
    }
  }
  for (const SafetensorsTensorEntry& e : entries) report->tensor_bytes += int64_t(e.bytes);
  report->tensors = int(entries.size());
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
  if (options.format == DType::kQ8_0) {
    metadata["tandem_weight_format"] = "q8_0";
    metadata["tandem_q8_block_size"] = std::to_string(kQ8BlockSize);
  }
  auto writer = SafetensorsFileWriter::Create(path, std::move(entries), metadata);
  if (!writer.ok()) return writer.status();
  // The last tensor made, reused while the next one has the same values (consecutive
  // tensors of one shape: q/k/v/o and gate/up of a layer when their shapes agree).
  HostTensor last;
  int last_values = -1;
  for (const SyntheticTensor& t : tensors) {
    if (t.values != last_values) {
      last = HostTensor();  // Free the previous tensor before making the next.
      auto stored = StoredTensor(t, options.format, options.seed);
      if (!stored.ok()) return stored.status();
      last = *std::move(stored);
      last_values = t.values;
    }
    for (absl::string_view part : StoredParts(last)) {
      if (absl::Status status = writer->Append(part); !status.ok()) return status;
    }
  }
  return writer->Finish();
}

}  // namespace

absl::StatusOr<SyntheticModelDirReport> WriteSyntheticModelDir(
    const SyntheticModelDirOptions& options, const std::string& out_dir) {
  auto model = ChooseModel(options);
  if (!model.ok()) return model.status();
  SyntheticModelDirReport report;
  const std::string config_json = ConfigJson(model->config, options);
  auto config = ParseLlamaConfig(config_json, out_dir + "/config.json");
  if (!config.ok()) return config.status();  // E.g. eos id not below the vocabulary.
  report.config = *config;
  if (absl::Status status = CheckOutDir(out_dir); !status.ok()) return status;
  std::error_code error;
  fs::create_directories(out_dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", out_dir, ": ", error.message()));
  }
  const std::string tensors_path = out_dir + "/model.safetensors";
  if (absl::Status status = WriteTensors(*model, options, tensors_path, &report); !status.ok()) {
    fs::remove(tensors_path, error);  // No half-written checkpoint left behind.
    return status;
  }
  if (!options.tokenizer_from.empty()) {
    absl::Status status = CopyTokenizerFiles(options.tokenizer_from, out_dir, &report.copied_files);
    if (!status.ok()) return status;
  }
  // Last, so that a directory with a config.json is complete.
  if (absl::Status status = WriteBinaryFile(out_dir + "/config.json", config_json); !status.ok()) {
    return status;
  }
  return report;
}

}  // namespace tandem
