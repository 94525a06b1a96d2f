// A GenerateRequest's sampling parameters: the model's defaults for the fields a request
// leaves unset, and their validation and resolution. The one place where defaults are
// decided, for the gRPC API (ValidateRequest) and the OpenAI-compatible HTTP API
// (coordinator/openai_request.h); tandem.proto's SamplingParams states the rule.
#ifndef TANDEM_COORDINATOR_REQUEST_SAMPLING_H_
#define TANDEM_COORDINATOR_REQUEST_SAMPLING_H_

#include <cstdint>
#include <optional>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "model/generation_config.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::coordinator {

// The values unset sampling fields take on this server.
struct RequestSamplingDefaults {
  // The model's temperature, [0, 100]; nullopt when the model states none, so that each
  // API's own default applies (TemperatureWhenUnset).
  std::optional<float> temperature;
  float top_p = 1.0f;  // (0, 1]; 1 = no limit.
  int top_k = 0;       // >= 0; 0 = no limit (values >= the vocabulary size: no limit).
};

// The defaults a model's generation_config.json gives, read as Hugging Face reads it:
// temperature 0 (greedy) when do_sample is false; else the file's temperature; else 1
// when do_sample is true (Hugging Face's default); else none. top_p and top_k are the
// file's, whatever do_sample says (they only act when sampling), else no limit.
RequestSamplingDefaults RequestSamplingDefaultsFrom(const SamplingDefaults& generation_config);

// The temperature of a request that leaves it unset: the model's, else `api_default`
// (tandem.proto: 0, greedy; the OpenAI API: 1).
float TemperatureWhenUnset(const RequestSamplingDefaults& defaults, float api_default);

// INVALID_ARGUMENT naming the field when a default is out of its range (server
// configuration error; ValidateServerLimits checks it once at startup).
absl::Status ValidateSamplingDefaults(const RequestSamplingDefaults& defaults);

// What the gRPC API's unset fields resolve to (ModelInfo.default_sampling): temperature
// TemperatureWhenUnset(defaults, 0), top_k clamped to `vocab_size`, top_p; no seed.
v1::SamplingParams DefaultSamplingParams(const RequestSamplingDefaults& defaults, int vocab_size);

struct ResolvedSampling {
  float temperature = 0.0f;  // [0, 100]; 0 = greedy.
  int top_k = 0;             // [0, vocab_size]; 0 = off.
  float top_p = 1.0f;        // (0, 1]; 1 = off.
  uint64_t seed = 0;         // Given, or drawn by the server.
  bool seed_from_request = false;
};

// Checks `params` against the ranges in tandem.proto (INVALID_ARGUMENT naming the field
// and its range) and fills its unset fields from DefaultSamplingParams(defaults,
// vocab_size); `random` draws the seed when the request has none.
absl::Status ResolveSampling(const v1::SamplingParams& params,
                             const RequestSamplingDefaults& defaults, int vocab_size,
                             absl::BitGenRef random, ResolvedSampling* out);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_REQUEST_SAMPLING_H_
