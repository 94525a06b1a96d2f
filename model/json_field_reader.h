// Typed, range-checked reads of the fields of one JSON object (config.json and its
// sub-objects), with INVALID_ARGUMENT errors that name the source file and field.
#ifndef TANDEM_MODEL_JSON_FIELD_READER_H_
#define TANDEM_MODEL_JSON_FIELD_READER_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tandem {

class JsonFieldReader {
 public:
  // Reads `object` (not owned; must outlive the reader). `source` names the file in
  // messages; `field_prefix` is prepended to field names there (e.g. "rope_scaling.").
  JsonFieldReader(const nlohmann::json& object, std::string source, std::string field_prefix = "");

  // INVALID_ARGUMENT "<source>: field \"<prefix><field>\" <what>".
  absl::Status Error(const std::string& field, const std::string& what) const;

  // True when the field exists and is not null.
  bool Has(const std::string& field) const;

  // Integer field in [min_value, max_value]; `*fallback` when absent (an error when
  // `fallback` is null). Non-integers (including 1.0) and values out of range fail.
  absl::Status Int(const std::string& field, long long min_value, long long max_value,
                   const int* fallback, int* out) const;
  // The same check on a value taken from the object (e.g. a list entry) named `field`.
  absl::Status IntValue(const nlohmann::json& value, const std::string& field, long long min_value,
                        long long max_value, int* out) const;

  // An integer or a non-empty list of integers (such as "eos_token_id": 2 or [1, 2]),
  // each in [min_value, max_value], into `*out` (replaced). The field must be present.
  absl::Status IntOrIntList(const std::string& field, long long min_value, long long max_value,
                            std::vector<int>* out) const;

  // Positive finite number that fits a float32; `*fallback` when absent (an error
  // when `fallback` is null).
  absl::Status PositiveNumber(const std::string& field, const double* fallback, double* out) const;

  // Boolean field; `fallback` when absent.
  absl::Status Bool(const std::string& field, bool fallback, bool* out) const;

  // Optional string field ("" when absent).
  absl::Status String(const std::string& field, std::string* out) const;

  const nlohmann::json& object() const { return object_; }
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& object_;
  const std::string source_;
  const std::string field_prefix_;
};

}  // namespace tandem

#endif  // TANDEM_MODEL_JSON_FIELD_READER_H_
