#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/json_field_reader.h"

namespace tandem {
namespace {

using Json = nlohmann::json;

// Upper bounds that no real Llama-family model reaches; they keep every derived
// size (parameter counts, byte sizes) far from integer overflow.
constexpr long long kMaxVocab = 1LL << 24;
constexpr long long kMaxHidden = 1LL << 18;
constexpr long long kMaxIntermediate = 1LL << 20;
constexpr long long kMaxLayers = 1LL << 12;
constexpr long long kMaxHeads = 1LL << 12;
constexpr long long kMaxHeadDim = 1LL << 12;
constexpr long long kMaxPositions = 1LL << 26;

absl::Status ParseArchitecture(const JsonFieldReader& reader, LlamaConfig* config) {
  static const char* const kArchitectures[] = {"LlamaForCausalLM", "MistralForCausalLM"};
  std::string model_type;
  if (auto status = reader.String("model_type", &model_type); !status.ok()) return status;
  if (!model_type.empty() && model_type != "llama" && model_type != "mistral") {
    return reader.Error("model_type", absl::StrCat("is \"", model_type,
                                                   "\"; only \"llama\" and \"mistral\" "
                                                   "models are supported"));
  }
  if (!reader.Has("architectures")) {
    if (model_type.empty()) {
      return reader.Error("architectures",
                          "is missing (and so is model_type): cannot tell whether this "
                          "is a Llama-family model");
    }
    config->architecture = model_type == "mistral" ? "MistralForCausalLM" : "LlamaForCausalLM";
    return absl::OkStatus();
  }
  const Json& list = reader.object().at("architectures");
  if (!list.is_array()) {
    return reader.Error("architectures",
                        absl::StrCat("must be a list of strings, got ", list.dump()));
  }
  for (const Json& entry : list) {
    if (!entry.is_string()) {
      return reader.Error("architectures",
                          absl::StrCat("must be a list of strings, got ", list.dump()));
    }
    for (const char* supported : kArchitectures) {
      if (entry.get<std::string>() == supported) {
        config->architecture = supported;
        return absl::OkStatus();
      }
    }
  }
  return reader.Error(
      "architectures",
      absl::StrCat("is ", list.dump(), "; supported: LlamaForCausalLM, MistralForCausalLM"));
}

absl::Status ParseRopeScaling(const JsonFieldReader& reader, RopeScaling* scaling) {
  *scaling = RopeScaling();
  if (!reader.Has("rope_scaling")) return absl::OkStatus();
  const Json& object = reader.object().at("rope_scaling");
  if (!object.is_object()) {
    return reader.Error("rope_scaling",
                        absl::StrCat("must be null or an object, got ", object.dump()));
  }
  const JsonFieldReader fields(object, reader.source(), "rope_scaling.");
  std::string type;
  const char* type_field = fields.Has("rope_type") ? "rope_type" : "type";
  if (auto status = fields.String(type_field, &type); !status.ok()) return status;
  if (type.empty()) {
    return fields.Error("rope_type", "is missing (neither rope_type nor type is given)");
  }
  if (type == "default") return absl::OkStatus();
  if (type != "linear" && type != "llama3") {
    return fields.Error(
        type_field, absl::StrCat("has type \"", type, "\"; supported: default, linear, llama3"));
  }
  double factor = 0;
  if (auto status = fields.PositiveNumber("factor", nullptr, &factor); !status.ok()) {
    return status;
  }
  scaling->factor = static_cast<float>(factor);
  if (type == "linear") {
    scaling->type = RopeScaling::Type::kLinear;
    return absl::OkStatus();
  }
  scaling->type = RopeScaling::Type::kLlama3;
  double low = 0, high = 0;
  int original_max = 0;
  absl::Status status = fields.PositiveNumber("low_freq_factor", nullptr, &low);
  if (status.ok()) status = fields.PositiveNumber("high_freq_factor", nullptr, &high);
  if (status.ok()) {
    status =
        fields.Int("original_max_position_embeddings", 1, kMaxPositions, nullptr, &original_max);
  }
  if (!status.ok()) return status;
  if (!(low < high)) {
    return fields.Error("low_freq_factor",
                        absl::StrCat("(", low, ") must be below high_freq_factor (", high, ")"));
  }
  scaling->low_freq_factor = static_cast<float>(low);
  scaling->high_freq_factor = static_cast<float>(high);
  scaling->original_max_position_embeddings = original_max;
  return absl::OkStatus();
}

absl::Status ParseTokenIds(const JsonFieldReader& reader, LlamaConfig* config) {
  const int default_bos = 1;
  if (auto status =
          reader.Int("bos_token_id", 0, kMaxVocab - 1, &default_bos, &config->bos_token_id);
      !status.ok()) {
    return status;
  }
  if (!reader.Has("eos_token_id")) {
    config->eos_token_ids = {2};
    return absl::OkStatus();
  }
  return reader.IntOrIntList("eos_token_id", 0, kMaxVocab - 1, &config->eos_token_ids);
}

// Features of the architecture that this runtime does not implement.
absl::Status CheckUnsupportedFeatures(const JsonFieldReader& reader) {
  for (const char* field : {"attention_bias", "mlp_bias"}) {
    bool enabled = false;
    if (auto status = reader.Bool(field, false, &enabled); !status.ok()) return status;
    if (enabled) return reader.Error(field, "is true; biases are not supported");
  }
  std::string activation;
  if (auto status = reader.String("hidden_act", &activation); !status.ok()) return status;
  if (!activation.empty() && activation != "silu") {
    return reader.Error("hidden_act",
                        absl::StrCat("is \"", activation, "\"; only \"silu\" is supported"));
  }
  return absl::OkStatus();
}

absl::Status ParseSizes(const JsonFieldReader& reader, LlamaConfig* config) {
  absl::Status status = reader.Int("vocab_size", 1, kMaxVocab, nullptr, &config->vocab_size);
  if (status.ok()) status = reader.Int("hidden_size", 1, kMaxHidden, nullptr, &config->hidden_size);
  if (status.ok())
    status =
        reader.Int("intermediate_size", 1, kMaxIntermediate, nullptr, &config->intermediate_size);
  if (status.ok())
    status = reader.Int("num_hidden_layers", 1, kMaxLayers, nullptr, &config->num_layers);
  if (status.ok())
    status = reader.Int("num_attention_heads", 1, kMaxHeads, nullptr, &config->num_heads);
  if (status.ok())
    status =
        reader.Int("num_key_value_heads", 1, kMaxHeads, &config->num_heads, &config->num_kv_heads);
  if (!status.ok()) return status;
  if (config->num_heads % config->num_kv_heads != 0) {
    return reader.Error("num_key_value_heads", absl::StrCat("(", config->num_kv_heads,
                                                            ") must divide num_attention_heads (",
                                                            config->num_heads, ")"));
  }
  if (reader.Has("head_dim")) {
    status = reader.Int("head_dim", 1, kMaxHeadDim, nullptr, &config->head_dim);
    if (!status.ok()) return status;
  } else {
    if (config->hidden_size % config->num_heads != 0) {
      return reader.Error(
          "hidden_size",
          absl::StrCat("(", config->hidden_size, ") is not divisible by num_attention_heads (",
                       config->num_heads, ") and head_dim is not given"));
    }
    config->head_dim = config->hidden_size / config->num_heads;
  }
  if (config->head_dim % 2 != 0) {
    return reader.Error(
        "head_dim", absl::StrCat("(", config->head_dim, ") must be even for rotary embeddings"));
  }
  const int default_max_positions = 2048;
  return reader.Int("max_position_embeddings", 1, kMaxPositions, &default_max_positions,
                    &config->max_position_embeddings);
}

absl::Status ParseConfigObject(const JsonFieldReader& reader, LlamaConfig* config) {
  if (auto status = ParseArchitecture(reader, config); !status.ok()) return status;
  if (auto status = CheckUnsupportedFeatures(reader); !status.ok()) return status;
  if (auto status = ParseSizes(reader, config); !status.ok()) return status;
  // Sliding-window attention (Mistral) equals full attention while the context fits in
  // the window, so the usable context is capped at the window.
  if (reader.Has("sliding_window")) {
    int window = 0;
    if (auto status = reader.Int("sliding_window", 1, kMaxPositions, nullptr, &window);
        !status.ok()) {
      return status;
    }
    config->max_position_embeddings = std::min(config->max_position_embeddings, window);
  }
  const double default_eps = 1e-6, default_theta = 10000.0;
  double eps = 0, theta = 0;
  if (auto status = reader.PositiveNumber("rms_norm_eps", &default_eps, &eps); !status.ok()) {
    return status;
  }
  if (auto status = reader.PositiveNumber("rope_theta", &default_theta, &theta); !status.ok()) {
    return status;
  }
  config->rms_norm_eps = static_cast<float>(eps);
  config->rope_theta = static_cast<float>(theta);
  if (auto status = ParseRopeScaling(reader, &config->rope_scaling); !status.ok()) {
    return status;
  }
  if (auto status = reader.Bool("tie_word_embeddings", false, &config->tie_word_embeddings);
      !status.ok()) {
    return status;
  }
  if (auto status = ParseTokenIds(reader, config); !status.ok()) return status;
  for (int id : config->eos_token_ids) {
    if (id >= config->vocab_size) {
      return reader.Error("eos_token_id", absl::StrCat("(", id, ") is not below vocab_size (",
                                                       config->vocab_size, ")"));
    }
  }
  if (config->bos_token_id >= config->vocab_size) {
    return reader.Error("bos_token_id",
                        absl::StrCat("(", config->bos_token_id, ") is not below vocab_size (",
                                     config->vocab_size, ")"));
  }
  return reader.String("torch_dtype", &config->torch_dtype);
}

}  // namespace

long long LlamaConfig::NumParameters() const {
  const long long hidden = hidden_size;
  const long long q_width = static_cast<long long>(num_heads) * head_dim;
  const long long kv_width = static_cast<long long>(num_kv_heads) * head_dim;
  const long long per_layer = 2 * hidden                         // two RMSNorm weights
                              + hidden * q_width                 // q_proj
                              + 2 * hidden * kv_width            // k_proj, v_proj
                              + q_width * hidden                 // o_proj
                              + 3 * hidden * intermediate_size;  // gate, up, down
  const long long embeddings = static_cast<long long>(vocab_size) * hidden;
  return embeddings * (tie_word_embeddings ? 1 : 2) + hidden + num_layers * per_layer;
}

absl::StatusOr<LlamaConfig> ParseLlamaConfig(const std::string& json_text,
                                             const std::string& source) {
  const Json root = Json::parse(json_text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object at the top level"));
  }
  LlamaConfig config;
  try {
    const JsonFieldReader reader(root, source);
    if (auto status = ParseConfigObject(reader, &config); !status.ok()) return status;
  } catch (const Json::exception& error) {
    // Every access is type-checked first; this only guards against surprises.
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", error.what()));
  }
  return config;
}

absl::StatusOr<LlamaConfig> LoadLlamaConfig(const std::string& model_dir) {
  const std::string path = absl::StrCat(model_dir, "/config.json");
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open the model config"));
  }
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": read error"));
  }
  return ParseLlamaConfig(text.str(), path);
}

std::vector<float> RopeInverseFrequencies(const LlamaConfig& config) {
  const int half = config.head_dim / 2;
  std::vector<float> frequencies(half);
  const RopeScaling& scaling = config.rope_scaling;
  const double kPi = 3.14159265358979323846;
  for (int j = 0; j < half; ++j) {
    double frequency =
        1.0 / std::pow(static_cast<double>(config.rope_theta),
                       static_cast<double>(2 * j) / static_cast<double>(config.head_dim));
    if (scaling.type == RopeScaling::Type::kLinear) {
      frequency /= scaling.factor;
    } else if (scaling.type == RopeScaling::Type::kLlama3) {
      const double factor = scaling.factor;
      const double low = scaling.low_freq_factor;
      const double high = scaling.high_freq_factor;
      const double original = scaling.original_max_position_embeddings;
      const double wavelength = 2 * kPi / frequency;
      if (wavelength > original / low) {
        frequency /= factor;  // Low frequencies: fully interpolated.
      } else if (wavelength >= original / high) {
        // Medium frequencies: blend between interpolated and original.
        const double smooth = (original / wavelength - low) / (high - low);
        frequency = (1 - smooth) * frequency / factor + smooth * frequency;
      }  // High frequencies (short wavelengths) stay as they are.
    }
    frequencies[j] = static_cast<float>(frequency);
  }
  return frequencies;
}

}  // namespace tandem
