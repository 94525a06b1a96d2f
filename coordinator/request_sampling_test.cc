// The sampling-defaults rule (generation_config.json -> RequestSamplingDefaults) for the
// configurations real models ship, the API fallback, their validation, and
// ResolveSampling: unset fields take the defaults, explicit values (0 included) win.
#include "coordinator/request_sampling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

namespace tandem::coordinator {
namespace {

using ::testing::HasSubstr;

SamplingDefaults Config(std::optional<bool> do_sample, std::optional<float> temperature,
                        std::optional<float> top_p = std::nullopt,
                        std::optional<int> top_k = std::nullopt) {
  SamplingDefaults c;
  c.do_sample = do_sample;
  c.temperature = temperature;
  c.top_p = top_p;
  c.top_k = top_k;
  return c;
}

TEST(RequestSamplingDefaultsFromTest, ReadsGenerationConfigAsHuggingFaceDoes) {
  // Llama-3 Instruct: {"do_sample": true, "temperature": 0.6, "top_p": 0.9}.
  RequestSamplingDefaults d = RequestSamplingDefaultsFrom(Config(true, 0.6f, 0.9f));
  EXPECT_EQ(d.temperature, 0.6f);
  EXPECT_EQ(d.top_p, 0.9f);
  EXPECT_EQ(d.top_k, 0);
  // Qwen3: do_sample, temperature 0.6, top_k 20, top_p 0.95.
  d = RequestSamplingDefaultsFrom(Config(true, 0.6f, 0.95f, 20));
  EXPECT_EQ(d.temperature, 0.6f);
  EXPECT_EQ(d.top_k, 20);
  // The bundled models: {"do_sample": false}: greedy, even with a temperature given.
  EXPECT_EQ(RequestSamplingDefaultsFrom(Config(false, std::nullopt)).temperature, 0.0f);
  d = RequestSamplingDefaultsFrom(Config(false, 0.7f, 0.8f, 5));
  EXPECT_EQ(d.temperature, 0.0f);
  EXPECT_EQ(d.top_p, 0.8f);  // Still applies to requests that ask for sampling.
  EXPECT_EQ(d.top_k, 5);
  // do_sample without a temperature: Hugging Face's default temperature 1.
  EXPECT_EQ(RequestSamplingDefaultsFrom(Config(true, std::nullopt)).temperature, 1.0f);
  // A temperature without do_sample is the model's temperature.
  EXPECT_EQ(RequestSamplingDefaultsFrom(Config(std::nullopt, 0.3f)).temperature, 0.3f);
  // Nothing stated (Llama-3 base, Mistral): no model temperature, no limits.
  d = RequestSamplingDefaultsFrom(Config(std::nullopt, std::nullopt));
  EXPECT_FALSE(d.temperature.has_value());
  EXPECT_EQ(d.top_p, 1.0f);
  EXPECT_EQ(d.top_k, 0);
}

TEST(TemperatureWhenUnsetTest, ModelDefaultElseTheApiDefault) {
  RequestSamplingDefaults none;
  EXPECT_EQ(TemperatureWhenUnset(none, 0.0f), 0.0f);
  EXPECT_EQ(TemperatureWhenUnset(none, 1.0f), 1.0f);
  RequestSamplingDefaults greedy;
  greedy.temperature = 0.0f;
  EXPECT_EQ(TemperatureWhenUnset(greedy, 1.0f), 0.0f);
  RequestSamplingDefaults warm;
  warm.temperature = 0.6f;
  EXPECT_EQ(TemperatureWhenUnset(warm, 0.0f), 0.6f);
}

TEST(ValidateSamplingDefaultsTest, RangesNamed) {
  EXPECT_TRUE(ValidateSamplingDefaults({}).ok());
  RequestSamplingDefaults d;
  d.temperature = -1.0f;
  EXPECT_THAT(std::string(ValidateSamplingDefaults(d).message()), HasSubstr("temperature = -1"));
  d = {};
  d.top_p = 0.0f;
  EXPECT_THAT(std::string(ValidateSamplingDefaults(d).message()), HasSubstr("top_p = 0"));
  d = {};
  d.top_k = -3;
  EXPECT_THAT(std::string(ValidateSamplingDefaults(d).message()), HasSubstr("top_k = -3"));
}

TEST(DefaultSamplingParamsTest, AllThreeSetTopKClampedNoSeed) {
  RequestSamplingDefaults d;
  d.top_k = 500;
  d.top_p = 0.9f;
  v1::SamplingParams p = DefaultSamplingParams(d, 100);
  ASSERT_TRUE(p.has_temperature() && p.has_top_k() && p.has_top_p());
  EXPECT_EQ(p.temperature(), 0.0f);
  EXPECT_EQ(p.top_k(), 100);
  EXPECT_EQ(p.top_p(), 0.9f);
  EXPECT_FALSE(p.has_seed());
}

TEST(ResolveSamplingTest, UnsetFieldsTakeDefaultsExplicitValuesWin) {
  RequestSamplingDefaults d = RequestSamplingDefaultsFrom(Config(true, 0.6f, 0.9f, 20));
  std::mt19937_64 random(1);
  ResolvedSampling out;
  ASSERT_TRUE(ResolveSampling(v1::SamplingParams(), d, 100, random, &out).ok());
  EXPECT_EQ(out.temperature, 0.6f);
  EXPECT_EQ(out.top_k, 20);
  EXPECT_EQ(out.top_p, 0.9f);
  EXPECT_FALSE(out.seed_from_request);
  v1::SamplingParams explicit_zero;
  explicit_zero.set_temperature(0.0f);
  explicit_zero.set_top_k(0);
  explicit_zero.set_seed(7);
  ASSERT_TRUE(ResolveSampling(explicit_zero, d, 100, random, &out).ok());
  EXPECT_EQ(out.temperature, 0.0f);
  EXPECT_EQ(out.top_k, 0);
  EXPECT_EQ(out.seed, 7u);
  EXPECT_TRUE(out.seed_from_request);
}

TEST(ResolveSamplingTest, OutOfRangeRejectedWithTheField) {
  std::mt19937_64 random(1);
  ResolvedSampling out;
  v1::SamplingParams p;
  p.set_top_k(101);
  absl::Status s = ResolveSampling(p, {}, 100, random, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("sampling.top_k = 101 is out of range"));
  p.Clear();
  p.set_temperature(-0.5f);
  EXPECT_THAT(std::string(ResolveSampling(p, {}, 100, random, &out).message()),
              HasSubstr("sampling.temperature = -0.5"));
}

}  // namespace
}  // namespace tandem::coordinator
