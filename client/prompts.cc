#include "client/prompts.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem::client {

absl::StatusOr<std::vector<std::string>> ParsePrompts(const std::string& text) {
  std::vector<std::string> prompts;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    const std::string line(absl::StripTrailingAsciiWhitespace(raw));
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const char first = absl::StripLeadingAsciiWhitespace(line)[0];
    if (first == '{' || first == '"') {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) {
        return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": invalid JSON"));
      }
      if (j.is_string()) {
        prompts.push_back(j.get<std::string>());
        continue;
      }
      const char* key = j.contains("prompt") ? "prompt" : "text";
      if (!j.is_object() || !j.contains(key) || !j[key].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_number, ": a JSON object needs a \"prompt\" string"));
      }
      const std::string prompt = j[key].get<std::string>();
      if (prompt.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": empty prompt"));
      }
      prompts.push_back(prompt);
      continue;
    }
    prompts.push_back(line);
  }
  if (prompts.empty()) return absl::InvalidArgumentError("no prompts");
  return prompts;
}

absl::StatusOr<std::vector<std::string>> LoadPrompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read prompts file ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<std::string>> prompts = ParsePrompts(text.str());
  if (!prompts.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", prompts.status().message()));
  }
  return prompts;
}

}  // namespace tandem::client
