#include "spec/acceptance_test_util.h"

#include <utility>

#include "gtest/gtest.h"
#include "spec/rng.h"
#include "spec/sampling.h"

namespace tandem {
namespace spec {
namespace testing {

Targets::Targets(std::vector<Dense> dists) : dists(std::move(dists)) {
  for (const Dense& d : this->dists) spans.push_back(absl::MakeConstSpan(d));
}

AcceptanceParams Rule(AcceptanceRule rule) {
  AcceptanceParams params;
  params.rule = rule;
  return params;
}

AcceptanceResult RunRule(const std::vector<Proposal>& proposals, const Targets& targets,
                         const AcceptanceParams& params, RandomKey key) {
  absl::StatusOr<AcceptanceResult> result = AcceptProposals(proposals, targets.spans, params, key);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : AcceptanceResult{};
}

absl::Status RunStatus(const std::vector<Proposal>& proposals, const Targets& targets,
                       const AcceptanceParams& params) {
  return AcceptProposals(proposals, targets.spans, params, {1, 0}).status();
}

Proposal Propose(int32_t token) { return Proposal{token, PointMass(token)}; }

Dense WithMassAt(int vocab, int token, float value) {
  Dense p(vocab, (1.0f - value) / (vocab - 1));
  p[token] = value;
  return p;
}

int32_t ResampleAt(const Dense& p, uint64_t seed, uint64_t position) {
  return SampleFromProbs(p, UniformDouble(seed, RandomStream::kResample, position));
}

Dense RandomDistribution(std::mt19937* gen, int vocab, int zeros, float peak) {
  std::gamma_distribution<float> gamma(0.7f, 1.0f);
  Dense d(vocab);
  for (float& x : d) x = gamma(*gen);
  d[(*gen)() % vocab] += peak;
  for (int z = 0; z < zeros; ++z) d[(*gen)() % vocab] = 0.0f;
  double sum = 0.0;
  for (float x : d) sum += x;
  for (float& x : d) x = static_cast<float>(x / sum);
  return d;
}

}  // namespace testing
}  // namespace spec
}  // namespace tandem
