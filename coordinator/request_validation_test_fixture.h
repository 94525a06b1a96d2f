// Testonly helpers shared by the request validation tests (request_validation_test.cc,
// request_sampling_validation_test.cc): small server limits, a minimal valid request,
// validation with a fixed random source, and the parameterized rejection case.
#ifndef TANDEM_COORDINATOR_REQUEST_VALIDATION_TEST_FIXTURE_H_
#define TANDEM_COORDINATOR_REQUEST_VALIDATION_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/request_validation.h"

namespace tandem::coordinator {

// Context 64 tokens, vocabulary 100; other limits at their defaults (4096, 128, 8, 1 MiB,
// 8, 256, 128).
ServerLimits TestLimits();

// A valid request: the text prompt "Hello", everything else unset.
v1::GenerateRequest BaseRequest();

// ValidateRequest(r, limits) with a generator seeded 99 (the same seed and id every call).
absl::StatusOr<ValidatedRequest> Validate(const v1::GenerateRequest& r,
                                          const ServerLimits& limits = TestLimits());

// One invalid request: `mutate` applied to BaseRequest() must be rejected with `code` and
// a message containing `message_part`. `name` names the test instance.
struct RejectCase {
  const char* name;
  std::function<void(v1::GenerateRequest&)> mutate;
  absl::StatusCode code;
  const char* message_part;
};

// Checks the rejection `c` describes (gtest assertions; fails the current test).
void ExpectRejected(const RejectCase& c);

// The instance name of a RejectCase (for INSTANTIATE_TEST_SUITE_P).
std::string RejectCaseName(const ::testing::TestParamInfo<RejectCase>& info);

class RejectTest : public ::testing::TestWithParam<RejectCase> {};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_REQUEST_VALIDATION_TEST_FIXTURE_H_
