#include "coordinator/request_sampling.h"

#include <algorithm>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "spec/acceptance_params.h"

namespace tandem::coordinator {
namespace {

constexpr spec::ParamRange kTemperatureRange{0.0f, true, 100.0f, true};  // [0, 100]
constexpr spec::ParamRange kTopPRange{0.0f, false, 1.0f, true};          // (0, 1]

template <typename... Args>
absl::Status Invalid(const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(args...));
}

}  // namespace

RequestSamplingDefaults RequestSamplingDefaultsFrom(const SamplingDefaults& generation_config) {
  RequestSamplingDefaults out;
  if (generation_config.do_sample == false) {
    out.temperature = 0.0f;
  } else if (generation_config.temperature) {
    out.temperature = *generation_config.temperature;
  } else if (generation_config.do_sample == true) {
    out.temperature = 1.0f;
  }
  out.top_p = generation_config.top_p.value_or(1.0f);
  out.top_k = generation_config.top_k.value_or(0);
  return out;
}

float TemperatureWhenUnset(const RequestSamplingDefaults& defaults, float api_default) {
  return defaults.temperature.value_or(api_default);
}

absl::Status ValidateSamplingDefaults(const RequestSamplingDefaults& defaults) {
  if (defaults.temperature && !kTemperatureRange.Contains(*defaults.temperature)) {
    return Invalid("sampling defaults: temperature = ", *defaults.temperature,
                   " must be in [0, 100]");
  }
  if (!kTopPRange.Contains(defaults.top_p)) {
    return Invalid("sampling defaults: top_p = ", defaults.top_p, " must be in (0, 1]");
  }
  if (defaults.top_k < 0) {
    return Invalid("sampling defaults: top_k = ", defaults.top_k, " must be >= 0");
  }
  return absl::OkStatus();
}

v1::SamplingParams DefaultSamplingParams(const RequestSamplingDefaults& defaults, int vocab_size) {
  v1::SamplingParams out;
  out.set_temperature(TemperatureWhenUnset(defaults, 0.0f));
  out.set_top_k(std::min(defaults.top_k, vocab_size));
  out.set_top_p(defaults.top_p);
  return out;
}

absl::Status ResolveSampling(const v1::SamplingParams& params,
                             const RequestSamplingDefaults& defaults, int vocab_size,
                             absl::BitGenRef random, ResolvedSampling* out) {
  if (params.has_temperature() && !kTemperatureRange.Contains(params.temperature())) {
    return Invalid("sampling.temperature = ", params.temperature(),
                   " is out of range; valid range [0, 100] (0 = greedy, unset = the model's "
                   "default)");
  }
  if (params.has_top_k() && (params.top_k() < 0 || params.top_k() > vocab_size)) {
    return Invalid("sampling.top_k = ", params.top_k(), " is out of range; valid range [0, ",
                   vocab_size, "] (0 = no limit, ", vocab_size,
                   " = the vocabulary size, unset = the model's default)");
  }
  if (params.has_top_p() && !kTopPRange.Contains(params.top_p())) {
    return Invalid("sampling.top_p = ", params.top_p(),
                   " is out of range; valid range (0, 1] (unset = the model's default)");
  }
  const v1::SamplingParams model = DefaultSamplingParams(defaults, vocab_size);
  out->temperature = params.has_temperature() ? params.temperature() : model.temperature();
  out->top_k = params.has_top_k() ? params.top_k() : model.top_k();
  out->top_p = params.has_top_p() ? params.top_p() : model.top_p();
  out->seed_from_request = params.has_seed();
  out->seed = params.has_seed() ? params.seed() : absl::Uniform<uint64_t>(random);
  return absl::OkStatus();
}

}  // namespace tandem::coordinator
