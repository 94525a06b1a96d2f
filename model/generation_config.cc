#include "model/generation_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/json_field_reader.h"

namespace tandem {
namespace {

using Json = nlohmann::json;

// The JSON object in `dir`/`name`; null when the file does not exist.
absl::StatusOr<Json> ReadOptionalJson(const std::string& dir, const std::string& name) {
  const std::string path = absl::StrCat(dir, "/", name);
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return Json();
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) return absl::NotFoundError(absl::StrCat(path, ": cannot open the file"));
  std::stringstream text;
  text << in.rdbuf();
  Json object = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  return object;
}

// Appends the file's "eos_token_id" (an id or a list) when present.
absl::Status AddEosIds(const Json& object, const std::string& source, int vocab_size,
                       std::vector<int>* ids) {
  const JsonFieldReader reader(object, source);
  if (!reader.Has("eos_token_id")) return absl::OkStatus();
  std::vector<int> listed;
  if (absl::Status s = reader.IntOrIntList("eos_token_id", 0, vocab_size - 1, &listed); !s.ok()) {
    return s;
  }
  ids->insert(ids->end(), listed.begin(), listed.end());
  return absl::OkStatus();
}

// A number field in [min_value, max_value] (min excluded when `min_open`), if present.
absl::Status OptionalNumber(const JsonFieldReader& reader, const std::string& field,
                            double min_value, bool min_open, double max_value,
                            std::optional<float>* out) {
  if (!reader.Has(field)) return absl::OkStatus();
  const Json& value = reader.object().at(field);
  const bool below = !value.is_number() || (min_open ? value.get<double>() <= min_value
                                                     : value.get<double>() < min_value);
  if (below || value.get<double>() > max_value) {
    return reader.Error(field, absl::StrCat("must be a number in ", min_open ? "(" : "[", min_value,
                                            ", ", max_value, "], got ", value.dump()));
  }
  *out = static_cast<float>(value.get<double>());
  return absl::OkStatus();
}

absl::Status ReadSampling(const Json& object, const std::string& source, SamplingDefaults* out) {
  const JsonFieldReader reader(object, source);
  if (absl::Status s = OptionalNumber(reader, "temperature", 0, false, 100, &out->temperature);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = OptionalNumber(reader, "top_p", 0, true, 1, &out->top_p); !s.ok()) return s;
  if (reader.Has("top_k")) {
    int top_k = 0;
    if (absl::Status s = reader.Int("top_k", 0, 1 << 24, nullptr, &top_k); !s.ok()) return s;
    out->top_k = top_k;
  }
  if (reader.Has("do_sample")) {
    bool do_sample = false;
    if (absl::Status s = reader.Bool("do_sample", false, &do_sample); !s.ok()) return s;
    out->do_sample = do_sample;
  }
  return absl::OkStatus();
}

// tokenizer_config.json's "eos_token" as an id, appended when present.
absl::Status AddEosToken(const Json& config, const std::string& source, const Tokenizer& tokenizer,
                         std::vector<int>* ids) {
  const JsonFieldReader reader(config, source);
  if (!reader.Has("eos_token")) return absl::OkStatus();
  const Json& value = config.at("eos_token");
  std::string token;
  if (value.is_string()) {
    token = value.get<std::string>();
  } else if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    token = value["content"].get<std::string>();
  } else {
    return reader.Error("eos_token", "must be a token string or {\"content\": ...}");
  }
  const int id = tokenizer.PieceToId(token);
  if (id < 0) {
    return reader.Error("eos_token", absl::StrCat("(\"", token, "\") is not a token of the model"));
  }
  ids->push_back(id);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& model_dir,
                                                      const Tokenizer& tokenizer) {
  GenerationConfig config;
  std::vector<int>& ids = config.stop_token_ids;
  const std::string generation_source = absl::StrCat(model_dir, "/generation_config.json");
  absl::StatusOr<Json> generation = ReadOptionalJson(model_dir, "generation_config.json");
  if (!generation.ok()) return generation.status();
  if (!generation->is_null()) {
    if (absl::Status s = AddEosIds(*generation, generation_source, tokenizer.vocab_size(), &ids);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = ReadSampling(*generation, generation_source, &config.sampling); !s.ok()) {
      return s;
    }
  }
  if (generation->is_null() || !generation->contains("eos_token_id")) {
    absl::StatusOr<Json> model = ReadOptionalJson(model_dir, "config.json");
    if (!model.ok()) return model.status();
    if (!model->is_null()) {
      const std::string source = absl::StrCat(model_dir, "/config.json");
      if (absl::Status s = AddEosIds(*model, source, tokenizer.vocab_size(), &ids); !s.ok()) {
        return s;
      }
    }
  }
  absl::StatusOr<Json> tokenizer_config = ReadOptionalJson(model_dir, "tokenizer_config.json");
  if (!tokenizer_config.ok()) return tokenizer_config.status();
  if (!tokenizer_config->is_null()) {
    const std::string source = absl::StrCat(model_dir, "/tokenizer_config.json");
    if (absl::Status s = AddEosToken(*tokenizer_config, source, tokenizer, &ids); !s.ok()) {
      return s;
    }
  }
  if (tokenizer.eos_id() >= 0) ids.push_back(tokenizer.eos_id());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return config;
}

std::string ModelDirectoryOf(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return path;
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace tandem
