#include "model/json_field_reader.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {

using Json = nlohmann::json;

JsonFieldReader::JsonFieldReader(const Json& object, std::string source, std::string field_prefix)
    : object_(object), source_(std::move(source)), field_prefix_(std::move(field_prefix)) {}

absl::Status JsonFieldReader::Error(const std::string& field, const std::string& what) const {
  return absl::InvalidArgumentError(
      absl::StrCat(source_, ": field \"", field_prefix_, field, "\" ", what));
}

bool JsonFieldReader::Has(const std::string& field) const {
  auto it = object_.find(field);
  return it != object_.end() && !it->is_null();
}

absl::Status JsonFieldReader::Int(const std::string& field, long long min_value,
                                  long long max_value, const int* fallback, int* out) const {
  if (!Has(field)) {
    if (fallback == nullptr) return Error(field, "is missing");
    *out = *fallback;
    return absl::OkStatus();
  }
  return IntValue(object_.at(field), field, min_value, max_value, out);
}

absl::Status JsonFieldReader::IntValue(const Json& value, const std::string& field,
                                       long long min_value, long long max_value, int* out) const {
  long long parsed = 0;
  if (value.is_number_unsigned()) {
    const auto unsigned_value = value.get<unsigned long long>();
    if (unsigned_value > static_cast<unsigned long long>(max_value)) {
      return Error(field, absl::StrCat("is ", unsigned_value, ", above the limit ", max_value));
    }
    parsed = static_cast<long long>(unsigned_value);
  } else if (value.is_number_integer()) {
    parsed = value.get<long long>();
  } else {
    return Error(field, absl::StrCat("must be an integer, got ", value.dump()));
  }
  if (parsed < min_value || parsed > max_value) {
    return Error(field,
                 absl::StrCat("is ", parsed, ", outside [", min_value, ", ", max_value, "]"));
  }
  *out = static_cast<int>(parsed);
  return absl::OkStatus();
}

absl::Status JsonFieldReader::IntOrIntList(const std::string& field, long long min_value,
                                           long long max_value, std::vector<int>* out) const {
  out->clear();
  if (!Has(field)) return Error(field, "is missing");
  const Json& value = object_.at(field);
  if (value.is_array() && value.empty()) return Error(field, "is an empty list");
  for (const Json& entry : value.is_array() ? value : Json::array({value})) {
    int id = 0;
    if (absl::Status status = IntValue(entry, field, min_value, max_value, &id); !status.ok()) {
      return status;
    }
    out->push_back(id);
  }
  return absl::OkStatus();
}

absl::Status JsonFieldReader::PositiveNumber(const std::string& field, const double* fallback,
                                             double* out) const {
  if (!Has(field)) {
    if (fallback == nullptr) return Error(field, "is missing");
    *out = *fallback;
    return absl::OkStatus();
  }
  const Json& value = object_.at(field);
  if (!value.is_number()) {
    return Error(field, absl::StrCat("must be a number, got ", value.dump()));
  }
  *out = value.get<double>();
  if (!std::isfinite(*out) || *out <= 0) {
    return Error(field, absl::StrCat("must be a positive number, got ", value.dump()));
  }
  if (*out > std::numeric_limits<float>::max()) {
    return Error(field, absl::StrCat("is too large for float32: ", value.dump()));
  }
  return absl::OkStatus();
}

absl::Status JsonFieldReader::Bool(const std::string& field, bool fallback, bool* out) const {
  if (!Has(field)) {
    *out = fallback;
    return absl::OkStatus();
  }
  const Json& value = object_.at(field);
  if (!value.is_boolean()) {
    return Error(field, absl::StrCat("must be true or false, got ", value.dump()));
  }
  *out = value.get<bool>();
  return absl::OkStatus();
}

absl::Status JsonFieldReader::String(const std::string& field, std::string* out) const {
  out->clear();
  if (!Has(field)) return absl::OkStatus();
  const Json& value = object_.at(field);
  if (!value.is_string()) {
    return Error(field, absl::StrCat("must be a string, got ", value.dump()));
  }
  *out = value.get<std::string>();
  return absl::OkStatus();
}

}  // namespace tandem
