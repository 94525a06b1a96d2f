// Test helpers for the acceptance rules (spec/acceptance.h): dense target
// distributions held as spans, rule parameters, and one-call wrappers around
// AcceptProposals. For tests only (RunRule records a gtest failure on an error).
#ifndef TANDEM_SPEC_ACCEPTANCE_TEST_UTIL_H_
#define TANDEM_SPEC_ACCEPTANCE_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <vector>

#include "spec/acceptance.h"

namespace tandem {
namespace spec {
namespace testing {

using Dense = std::vector<float>;

// Owns K+1 dense target distributions and exposes them as spans.
struct Targets {
  explicit Targets(std::vector<Dense> dists);
  std::vector<Dense> dists;
  std::vector<absl::Span<const float>> spans;
};

// Parameters of `rule` with every default.
AcceptanceParams Rule(AcceptanceRule rule);

// AcceptProposals' result; a failed EXPECT (and an empty result) on an error.
AcceptanceResult RunRule(const std::vector<Proposal>& proposals, const Targets& targets,
                         const AcceptanceParams& params, RandomKey key = {1, 0});

// AcceptProposals' status with the key {1, 0}.
absl::Status RunStatus(const std::vector<Proposal>& proposals, const Targets& targets,
                       const AcceptanceParams& params);

// A deterministic proposal: `token` with q = PointMass(token).
Proposal Propose(int32_t token);

// Probability vector with `value` at `token`, the rest spread evenly over the others.
Dense WithMassAt(int vocab, int token, float value);

// What the documented kResample draw samples from p at generated index `position`.
int32_t ResampleAt(const Dense& p, uint64_t seed, uint64_t position);

// A random distribution over `vocab` tokens (gamma(0.7) weights, `peak` added to one
// token, then `zeros` random tokens set to 0, normalised).
Dense RandomDistribution(std::mt19937* gen, int vocab, int zeros, float peak);

}  // namespace testing
}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_ACCEPTANCE_TEST_UTIL_H_
