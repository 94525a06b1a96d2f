#include "client/prometheus_text.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem::client {
namespace {

bool ParseValue(const std::string& text, double* value) {
  if (text == "+Inf" || text == "Inf") {
    *value = INFINITY;
    return true;
  }
  if (text == "-Inf") {
    *value = -INFINITY;
    return true;
  }
  if (text == "NaN") {
    *value = NAN;
    return true;
  }
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

bool IsNameChar(char c, bool first) {
  return absl::ascii_isalpha(c) || c == '_' || c == ':' || (!first && absl::ascii_isdigit(c));
}

// Parses `{a="x",b="y"}` starting at line[*pos] == '{'; leaves *pos after '}'.
bool ParseLabels(const std::string& line, size_t* pos, std::map<std::string, std::string>* out) {
  size_t i = *pos + 1;
  while (true) {
    while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
    if (i < line.size() && line[i] == '}') {
      *pos = i + 1;
      return true;
    }
    size_t start = i;
    while (i < line.size() && IsNameChar(line[i], i == start)) ++i;
    if (i == start || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') return false;
    const std::string key = line.substr(start, i - start);
    i += 2;
    std::string value;
    while (i < line.size() && line[i] != '"') {
      if (line[i] == '\\' && i + 1 < line.size()) {
        ++i;
        value += line[i] == 'n' ? '\n' : line[i];
      } else {
        value += line[i];
      }
      ++i;
    }
    if (i >= line.size()) return false;
    ++i;  // Closing quote.
    (*out)[key] = value;
  }
}

}  // namespace

absl::StatusOr<std::vector<PrometheusSample>> ParsePrometheusText(const std::string& text) {
  std::vector<PrometheusSample> samples;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    const std::string line(absl::StripAsciiWhitespace(raw));
    if (line.empty() || line[0] == '#') continue;
    PrometheusSample sample;
    size_t i = 0;
    while (i < line.size() && IsNameChar(line[i], i == 0)) ++i;
    sample.name = line.substr(0, i);
    bool ok = !sample.name.empty();
    if (ok && i < line.size() && line[i] == '{') ok = ParseLabels(line, &i, &sample.labels);
    std::vector<std::string> rest;
    if (ok) {
      rest = absl::StrSplit(line.substr(i), ' ', absl::SkipEmpty());
      ok = (rest.size() == 1 || rest.size() == 2) && ParseValue(rest[0], &sample.value);
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics line ", line_number, " is not a sample: '", line, "'"));
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::optional<double> FindSample(const std::vector<PrometheusSample>& samples,
                                 const std::string& name,
                                 const std::map<std::string, std::string>& labels) {
  for (const PrometheusSample& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [key, value] : labels) {
      auto it = s.labels.find(key);
      if (it == s.labels.end() || it->second != value) {
        match = false;
        break;
      }
    }
    if (match) return s.value;
  }
  return std::nullopt;
}

void AddGrowth(const std::vector<PrometheusSample>& before,
               const std::vector<PrometheusSample>& after, std::vector<PrometheusSample>* total) {
  const auto same = [](const PrometheusSample& a, const PrometheusSample& b) {
    return a.name == b.name && a.labels == b.labels;
  };
  for (const PrometheusSample& a : after) {
    const bool counter = absl::EndsWith(a.name, "_total") || absl::EndsWith(a.name, "_count") ||
                         absl::EndsWith(a.name, "_sum") || absl::EndsWith(a.name, "_bucket");
    double value = a.value;
    if (counter) {
      for (const PrometheusSample& b : before) {
        if (same(a, b)) {
          value -= b.value;
          break;
        }
      }
    }
    auto it = std::find_if(total->begin(), total->end(),
                           [&](const PrometheusSample& t) { return same(a, t); });
    if (it == total->end()) {
      total->push_back({a.name, a.labels, value});
    } else {
      it->value = counter ? it->value + value : value;
    }
  }
}

}  // namespace tandem::client
